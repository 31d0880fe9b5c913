"""Raw samples -> canonical rows: exposition parsing, vendor profiles (YAML), units, error taxonomy, versions.

Pure: bytes, text or frames in, Polars frames out. No network, no database, no files except profile YAML.
"""

from canonical.metrics import ERROR_CLASSES, METRICS, SEVERITIES, Canonical, ErrorClass
from normalizers.exceptions import NormalizerError, ProfileError, UnknownProfileError
from normalizers.exposition import ExpositionParser, RawBatch
from normalizers.normalize import Normalized, Normalizer, Options, StateLookup
from normalizers.profile import Profile
from normalizers.profile.loader import load_profile, load_profile_text
from normalizers.profile.sets import ProfileSet, check_profiles, load_profiles
from normalizers.series import Context, canonical_json

__all__ = [
    "ERROR_CLASSES", "METRICS", "SEVERITIES", "Canonical", "Context", "ErrorClass", "ExpositionParser",
    "Normalized", "Normalizer", "NormalizerError", "Options", "Profile", "ProfileError", "ProfileSet", "RawBatch",
    "StateLookup", "UnknownProfileError", "canonical_json", "check_profiles", "load_profile", "load_profile_text",
    "load_profiles",
]
