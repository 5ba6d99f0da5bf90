"""Loading and validating specs. Imports no torch, so a whole experiment validates before anything heavy starts."""

from torchforce.spec.checks import expect_bool, expect_choice, expect_dict, expect_float, expect_int
from torchforce.spec.errors import SpecError, SpecWarning, did_you_mean, unknown_name_error, warn_spec
from torchforce.spec.frequency import Frequency, parse_frequency
from torchforce.spec.load import load_file, load_spec
from torchforce.spec.registry import Registry, check_kwargs, check_provided, import_path
from torchforce.spec.spaces import ActionSpec, StateSpec, normalize_actions, normalize_states

__all__ = [
    "ActionSpec",
    "Frequency",
    "Registry",
    "SpecError",
    "SpecWarning",
    "StateSpec",
    "check_kwargs",
    "check_provided",
    "did_you_mean",
    "expect_bool",
    "expect_choice",
    "expect_dict",
    "expect_float",
    "expect_int",
    "import_path",
    "load_file",
    "load_spec",
    "normalize_actions",
    "normalize_states",
    "parse_frequency",
    "unknown_name_error",
    "warn_spec",
]
