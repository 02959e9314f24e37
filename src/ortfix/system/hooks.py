"""What every OS's hook files share: the check that refuses a path that cannot be written into a hook file safely, the
sh lines that put folders first on a variable and take exactly those back out (conda's activate.d/deactivate.d
hooks), and the end of a hook module that acts when onnxruntime is first imported. Each OS's hooks are rendered and
read by its own folder: system/linux/hooks.py (conda's LD_LIBRARY_PATH hook, the preload hook) and
system/windows/hooks.py (the PATH hook, conda's .bat/.ps1/.sh scripts)."""

from __future__ import annotations

from ortfix.errors import OrtfixError
from ortfix.i18n import N_, Msg
from ortfix.safetext import first_control

PLAIN_PATH = Msg(N_("move the environment to a plain path"))


def check_hook_path(path: str, what: str, *, shell: bool) -> None:  # what: a marked name (N_)
    """Refuse a path that cannot be written into a hook file safely: any control character (a newline would end the
    `# ortfix-dir:` comment line and start a command); for the shell hooks (`shell`), also one that is not valid
    UTF-8 (surrogate escapes from the file system's bytes)."""
    ch = first_control(path)
    if ch is not None:
        raise OrtfixError(Msg(N_("{what} {path} contains a control character ({char}); ortfix cannot write a safe "
                                 "hook there"), what=Msg(what), path=repr(path), char=repr(ch)), hint=PLAIN_PATH)
    if shell:
        try:
            path.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise OrtfixError(Msg(N_("{what} {path} is not valid UTF-8; ortfix cannot write a safe shell hook there"),
                                  what=Msg(what), path=repr(path)), hint=PLAIN_PATH) from exc


def hook_var(kind: str, variable: str, prefix: str) -> str:
    """`ORTFIX_<KIND>_<VARIABLE>_<hash of the prefix>`: one per environment, so that stacked activations (`conda
    activate --stack`) of two hooked environments each take back their own."""
    import hashlib  # here: a check imports this module, and hashlib's OpenSSL binding costs 2-3 ms

    return f"ORTFIX_{kind}_{variable}_" + hashlib.sha256(prefix.encode("utf-8", "surrogateescape")).hexdigest()[:12]


def sh_prepend(variable: str, assigns: str, parts: str, unsets: str, prefix: str) -> str:
    """The sh lines that put `parts` (`${_ortfix_0}:...`, assigned by `assigns`) first on `variable` and remember
    exactly what they put there, and whether the variable was unset."""
    added, unset = hook_var("ADDED", variable, prefix), hook_var("UNSET", variable, prefix)
    return f"""if [ -n "${{{variable}+x}}" ]; then
    unset {unset}
else
    export {unset}=1
fi
{assigns}
export {added}="{parts}"
export {variable}="${{{added}}}${{{variable}:+:${{{variable}}}}}"
unset {unsets}
"""


def sh_take_back(variable: str, prefix: str) -> str:
    """The sh lines that remove what `sh_prepend` put on `variable` (the first place it occurs, as one block) from the
    value as it is now, and unset the variable when it was unset before and nothing else is left. Not a saved value
    put back: conda exports its own new PATH before it runs deactivate.d scripts (conda/activate.py,
    `_Activator._yield_commands`: export_path, then deactivate_scripts), and a switch to another environment runs the
    old one's deactivate.d before the new one's activate.d; putting back a saved value would undo conda's change and
    anything set since."""
    added, unset = hook_var("ADDED", variable, prefix), hook_var("UNSET", variable, prefix)
    return f"""if [ -n "${{{added}+x}}" ]; then
    case ":${{{variable}-}}:" in
        *":${{{added}}}:"*)
            _ortfix_v=":${{{variable}-}}:"
            _ortfix_v="${{_ortfix_v%%:"${{{added}}}":*}}:${{_ortfix_v#*:"${{{added}}}":}}"
            _ortfix_v="${{_ortfix_v#:}}"
            _ortfix_v="${{_ortfix_v%:}}"
            if [ -z "${{_ortfix_v}}" ] && [ -n "${{{unset}+x}}" ]; then
                unset {variable}
            else
                export {variable}="${{_ortfix_v}}"
            fi
            unset _ortfix_v
            ;;
    esac
    unset {added} {unset}
fi
"""


def on_onnxruntime_import(finder: str, action: str) -> str:
    """The end of a hook module, shared by ortfix's hooks: a meta-path finder named `finder` that calls the module's
    `action()` when onnxruntime is first imported (at once if it already is), then steps aside; never raises."""
    return f'''

class {finder}(object):
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name == "onnxruntime":
            try:
                sys.meta_path.remove(cls)
            except ValueError:
                pass
            {action}()
        return None


try:
    if "onnxruntime" in sys.modules:
        {action}()
    else:
        sys.meta_path.insert(0, {finder})
except Exception as exc:
    _debug("not installed: %s: %s" % (type(exc).__name__, exc))
'''  # i18n: english (a hook file's text)
