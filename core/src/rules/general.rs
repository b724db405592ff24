//! Rules of every covered call, whatever its family: a failed call is never left unexplained.

use super::{Family, Kind, Rule, Severity, Source};

/// The rule a covered call that failed gets when no other rule explains it: the code, and what
/// the header that defines it says it means.
pub static CALL_FAILED: Rule = Rule {
    id: "call.failed",
    severity: Severity::Info,
    kind: Kind::Misuse,
    requirement: "Explains a covered call that failed and that no other rule explains: the code \
        the driver returned, and what the API's header says the code means. Harmless in itself; \
        it says where a failure the program may not check began.",
    source: Source {
        document: "CUDA Driver API (cuda.h) and HIP Runtime API (hip_runtime_api.h)",
        section: "Error codes",
        function: "CUresult / hipError_t",
    },
    quote: "CUresult: error codes (cuda.h); hipError_t (hip_runtime_api.h)",
    documented_code: None,
    fix: "check the call's result; the message says what the code means",
};

pub static FAMILY: Family = Family {
    name: "general",
    title: "Every covered call",
    checks: &[],
    reported: &[],
    engine: &[&CALL_FAILED],
    divergences: &[],
};
