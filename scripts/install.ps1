# Install ortfix for this user on Windows: finds a Python 3.9+ ($env:ORTFIX_INSTALL_PYTHON, else `py -3`, else
# `python`) and runs bootstrap.py, which lies beside this file and holds all the logic, with every argument given here.
#   powershell -ExecutionPolicy Bypass -File install.ps1 [--find-links DIR --no-index] [--python TARGET] [--yes] [--uninstall]
# Exit codes: bootstrap.py's (see its --help); 3 when no Python 3.9+ is found.
$bootstrap = Join-Path $PSScriptRoot 'bootstrap.py'
if (-not (Test-Path -LiteralPath $bootstrap)) {
    [Console]::Error.WriteLine("ortfix-install: error: $bootstrap is missing: run install.ps1 from ortfix's scripts folder (a checkout or the sdist)")
    exit 2
}
$candidates = @()
if ($env:ORTFIX_INSTALL_PYTHON) { $candidates += , @($env:ORTFIX_INSTALL_PYTHON) }
$candidates += , @('py', '-3')
$candidates += , @('python')
$found = $null
foreach ($candidate in $candidates) {
    $exe = $candidate[0]
    $pre = @($candidate | Select-Object -Skip 1)
    if (-not (Get-Command $exe -ErrorAction SilentlyContinue)) { continue }
    & $exe @pre -c 'import sys; sys.exit(sys.version_info < (3, 9))' 2>$null | Out-Null
    if ($LASTEXITCODE -eq 0) {
        & $exe @pre $bootstrap @args
        exit $LASTEXITCODE
    }
    if (-not $found) { $found = $candidate -join ' ' }
}
if ($found) {
    [Console]::Error.WriteLine("ortfix-install: error: $found is not Python 3.9 or newer, which ortfix needs: install one (python.org or winget install Python.Python.3.12), or name it with `$env:ORTFIX_INSTALL_PYTHON")
    exit 3
}
[Console]::Error.WriteLine("ortfix-install: error: no Python found (py -3, python): install Python 3.9 or newer (python.org or winget install Python.Python.3.12), or name one with `$env:ORTFIX_INSTALL_PYTHON")
exit 3
