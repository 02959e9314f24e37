"""What a finding is: its stable code and its severity. One definition each; README.md documents every code
(tests/test_docs.py checks both ways)."""

from ortfix.strenum import StrEnum


class Severity(StrEnum):
    ERROR = "error"  # the GPU path cannot work until this is fixed
    WARNING = "warning"  # it may work now but is fragile or slower than it should be
    INFO = "info"  # worth knowing; nothing to fix

    @property
    def rank(self) -> int:
        return {"error": 0, "warning": 1, "info": 2}[self.value]


class FindingCode(StrEnum):
    """Stable codes. Never renumber; retire instead."""

    NO_ORT = "ORT001"
    CPU_ONLY = "ORT002"
    CPU_AND_GPU = "ORT003"
    VARIANT_CONFLICT = "ORT004"
    DEPENDENT_PULLS_CPU = "ORT005"
    PROVIDER_MISSING = "ORT006"
    ORT_DAMAGED = "ORT007"
    ORT_ORPHANED = "ORT008"
    NO_DRIVER = "DRV001"
    DRIVER_TOO_OLD = "DRV002"
    REBOOT_NEEDED = "DRV003"
    GPU_ARCH = "GPU001"
    LIB_MISSING = "LIB001"
    LIB_NOT_ON_PATH = "LIB002"
    LIB_WRONG_MAJOR = "LIB003"
    LIB_SHADOWED = "LIB004"
    SONAME_LINK_MISSING = "LIB005"
    UNREADABLE_DIR = "LIB006"
    LIB_DAMAGED = "LIB007"
    LIB_OTHER_CUDA = "LIB008"
    LIB_PARTIAL_COPY = "LIB009"
    TORCH_MISMATCH = "TORCH001"
    UNKNOWN_VERSION = "MTX001"
    MATRIX_DISAGREES = "MTX002"
    INTERRUPTED = "TX001"
    MSVC_RUNTIME_OLD = "WIN001"
    ZLIBWAPI_MISSING = "WIN002"
    TORCH_LIB_ONLY = "WIN003"
    LOGIN_PATH_DIFFERS = "WIN004"
    STORE_PYTHON = "WIN005"
    PROJECT_UNDOES = "PRJ001"
    TENSORRT_NOT_LOADING = "TRT001"
    TENSORRT_WRONG_MAJOR = "TRT002"
    TENSORRT_TOO_OLD = "TRT003"
    TENSORRT_OTHER_CUDA = "TRT004"
    GENAI_CPU = "GENAI001"
    GENAI_OTHER_CUDA = "GENAI002"
    GENAI_OTHER_FLAVOUR = "GENAI003"


# What ortfix's plan can fix, by the kind of action that fixes it: plan/make.py and plan/hook_actions.py take an
# action's `fixes` from these (and plan/make.py checks that every action's are in PLAN_FIXES), and `check` lists the
# findings a plan fixes first (check/diagnose.py). Whether a given plan fixes one depends on the machine (a library
# no NVIDIA wheel ships stays unresolved); these are the codes it can.
UNINSTALL_FIXES = (FindingCode.CPU_ONLY, FindingCode.CPU_AND_GPU, FindingCode.VARIANT_CONFLICT,
                   FindingCode.PROVIDER_MISSING)  # uninstalling the packages the finding names (in this order)
INSTALL_FIXES = frozenset({FindingCode.NO_ORT, FindingCode.LIB_MISSING, FindingCode.LIB_WRONG_MAJOR,
                           FindingCode.DRIVER_TOO_OLD, FindingCode.LIB_OTHER_CUDA})  # installing the build and wheels
REINSTALL_FIXES = frozenset({FindingCode.ORT_DAMAGED, FindingCode.LIB_DAMAGED,  # plan/repairs.py
                             FindingCode.ORT_ORPHANED,
                             FindingCode.GPU_ARCH, FindingCode.TORCH_MISMATCH})  # another build in place of this one
HOOK_FIXES = frozenset({FindingCode.LIB_NOT_ON_PATH, FindingCode.LIB_SHADOWED, FindingCode.LIB_MISSING,
                        FindingCode.LIB_WRONG_MAJOR, FindingCode.SONAME_LINK_MISSING,
                        FindingCode.LIB_OTHER_CUDA, FindingCode.LIB_PARTIAL_COPY,
                        FindingCode.TORCH_LIB_ONLY,
                        FindingCode.TENSORRT_NOT_LOADING})  # the environment's libraries first
PLAN_FIXES = frozenset({*UNINSTALL_FIXES, *INSTALL_FIXES, *REINSTALL_FIXES, *HOOK_FIXES,
                        FindingCode.SONAME_LINK_MISSING,  # a symlink action
                        FindingCode.PROJECT_UNDOES,  # a project-update action
                        FindingCode.ZLIBWAPI_MISSING,  # installing a cuDNN 9 build (plan/choose_build.cudnn9_first)
                        FindingCode.GENAI_CPU, FindingCode.GENAI_OTHER_CUDA,  # the genai swap (plan/genai.py)
                        FindingCode.GENAI_OTHER_FLAVOUR,
                        FindingCode.TENSORRT_WRONG_MAJOR,  # with --with tensorrt (plan/tensorrt.py)
                        FindingCode.TENSORRT_OTHER_CUDA})
