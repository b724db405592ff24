//! `call.failed` and `divergence.unlisted`: a covered call that failed is never left unexplained,
//! and a code its documentation does not name is said to be one (through the facts fake).

use super::fake::{check_negative_cases, Case, FakeFacts, Harness};
use sharecheck_core::codes::*;
use sharecheck_core::ffi::*;
use sharecheck_core::functions::args;

fn world() -> Harness {
    Harness::new(FakeFacts::devices(2))
}

fn limits(prop: &CUlogicalEndpointProp) -> args::cuLogicalEndpointGetLimits {
    static mut SINK: [u64; 2] = [0; 2];
    // SAFETY: the harness never writes through out-parameters; the pointers are only carried.
    let (a, m) = unsafe { (&raw mut SINK[0], &raw mut SINK[1]) };
    args::cuLogicalEndpointGetLimits {
        bindAlignment: Out(a.cast()),
        maxSize: Out(m.cast()),
        prop: LogicalEndpointPropPtr(prop),
    }
}

static PROP: CUlogicalEndpointProp = CUlogicalEndpointProp {
    type_: CU_LOGICAL_ENDPOINT_TYPE_UNICAST,
    device_or_num_devices: 0,
    size: 2 << 20,
    ipc_handle_types: 0,
    flags: 0,
};

const NEGATIVE: &[Case] = &[(
    "a covered call refused with a documented code and no rule to explain it",
    &["call.failed"],
    |h| h.call(limits(&PROP), NOT_SUPPORTED),
)];

#[test]
fn each_negative_case_reports_exactly_its_rules_and_every_general_rule_has_one() {
    check_negative_cases(world, NEGATIVE, &["general"], []);
}

#[test]
fn the_explanation_names_the_code_and_what_the_header_says() {
    let ran = world().call(limits(&PROP), NOT_SUPPORTED);
    assert_eq!(
        ran.messages,
        [
            "the driver returned CUDA_ERROR_NOT_SUPPORTED (801): This error indicates that the \
          attempted operation is not supported on the current system or device."
        ]
    );
    // A code no header describes is said to be one.
    let ran = world().call(limits(&PROP), 123456);
    assert_eq!(ran.rules, ["divergence.unlisted"]);
    assert!(
        ran.messages[0].contains("123456, a code its header does not describe"),
        "{:?}",
        ran.messages
    );
}

#[test]
fn a_code_the_documentation_does_not_name_is_a_divergence_once_then_a_failure() {
    let h = world();
    // cuda.h names no CUDA_ERROR_INVALID_DEVICE (101) for cuLogicalEndpointGetLimits.
    let ran = h.call(limits(&PROP), INVALID_DEVICE);
    assert_eq!(ran.rules, ["divergence.unlisted"]);
    assert_eq!(
        ran.messages,
        [
            "CUDA_ERROR_INVALID_DEVICE (101) is not among the codes cuda.h names for \
             cuLogicalEndpointGetLimits; the driver returned CUDA_ERROR_INVALID_DEVICE (101): \
             This indicates that the device ordinal supplied by the user does not correspond to \
             a valid CUDA device or that the action requested is invalid for the specified \
             device. (reported once per process; later calls with it get call.failed)"
        ]
    );
    // Once per process and code: the next such call is explained as a failure.
    assert_eq!(h.call(limits(&PROP), INVALID_DEVICE).rules, ["call.failed"]);
    // Another undocumented code is its own divergence; a documented one is not one.
    assert_eq!(
        h.call(limits(&PROP), CONTEXT_IS_DESTROYED).rules,
        ["divergence.unlisted"]
    );
    assert_eq!(h.call(limits(&PROP), NOT_SUPPORTED).rules, ["call.failed"]);
}

#[test]
fn successes_observed_calls_and_explained_failures_get_no_explanation() {
    let h = world();
    assert!(h.call(limits(&PROP), SUCCESS).rules.is_empty());
    // Observed, not covered: the program's own business.
    let mut p = CUdeviceptr(0);
    let ran = h.call(
        args::cuMemAlloc_v2 {
            dptr: Out(&mut p),
            bytesize: Size(64),
        },
        OUT_OF_MEMORY_CODE,
    );
    assert!(ran.rules.is_empty(), "{:?}", ran.messages);
    // Explained by a rule: that rule alone.
    let ran = h.call(
        args::cuLogicalEndpointIdRelease {
            baseLeId: CUlogicalEndpointId(5),
            count: Count32(1),
        },
        INVALID_VALUE,
    );
    assert_eq!(ran.rules, ["cuLogicalEndpointIdRelease.not-reserved"]);
}

/// `CUDA_ERROR_OUT_OF_MEMORY`.
const OUT_OF_MEMORY_CODE: i32 = 2;

/// A check that raises a rule its `CheckInfo` does not list is caught in debug builds (the
/// catalogue would not know where that rule is checked); one it lists passes.
#[test]
#[cfg(debug_assertions)]
fn a_check_may_raise_only_the_rules_its_catalogue_entry_lists() {
    use sharecheck_core::rules::{general::CALL_FAILED, peer};
    let h = world();
    let options = sharecheck_core::options::Options::default();
    let mut cx = super::Cx::new(&h.facts, &h.states, &options, 0);
    let check = &peer::checks::CAN_ACCESS_CUDA;
    cx.running(check);
    cx.flag(check.rules[0], String::new);
    let raised = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        cx.flag(&CALL_FAILED, String::new);
    }));
    let message = *raised.unwrap_err().downcast::<String>().unwrap();
    assert!(
        message.contains("peer.can-access.cuda raised call.failed"),
        "{message}"
    );
}

/// A finding's stack is taken while its lines are printed, and without a trace no longer: past
/// the duplicate limit a finding is only counted, and a loop that repeats a misuse pays no
/// unwind for it (about 110 us a call before).
#[test]
fn without_a_trace_a_finding_past_the_duplicate_limit_takes_no_stack() {
    use crate::findings::Finding;
    use sharecheck_core::options::DEFAULT_DUPLICATE_LIMIT;
    assert!(!crate::trace::enabled());
    let options = crate::engine::options();
    assert!(options.stack_depth > 0 && options.duplicate_limit == DEFAULT_DUPLICATE_LIMIT);
    let states = super::state::States::default();
    let at = super::At {
        pid: 1,
        tid: 1,
        seq: 1,
    };
    let stacks: Vec<bool> = (0..DEFAULT_DUPLICATE_LIMIT + 3)
        .map(|_| {
            let found = vec![Finding {
                rule: &sharecheck_core::rules::general::CALL_FAILED,
                message: "repeated".into(),
                stack: Default::default(),
            }];
            let kept = super::report(&states, found, || "call()".into(), at);
            !kept[0].stack.is_empty()
        })
        .collect();
    let limit = DEFAULT_DUPLICATE_LIMIT as usize;
    assert!(stacks[..limit].iter().all(|&s| s), "{stacks:?}");
    assert!(stacks[limit..].iter().all(|&s| !s), "{stacks:?}");
}

/// An untraced call of a row that only observes the driver's answer is observed without the
/// checks' context ([`super::Checked::OBSERVED_QUICKLY`]) exactly where every check of the row has
/// a quick path: CUDA's frees (issue 28's budget: the alloc and free pair). `hipFree`'s pool
/// check has none: it stays on the full path.
#[test]
fn rows_observed_quickly_are_the_frees_whose_every_check_has_a_quick_path() {
    macro_rules! observed_rows {
        ($( $sym:ident => $( $family:ident :: $check:ident ),* ; )*) => {
            [$( (
                stringify!($sym),
                <args::$sym as super::Checked>::OBSERVED_QUICKLY,
                <args::$sym as super::Checked>::CHECKED,
            ) ),*]
        };
    }
    let rows = sharecheck_core::check_table!(observed_rows);
    let quick: Vec<&str> = rows.iter().filter(|r| r.1 && r.2).map(|r| r.0).collect();
    assert_eq!(
        quick,
        [
            "cuMemFree_v2",
            "cuMemFreeHost",
            "cuMemFreeAsync",
            "cuMemFreeAsync_ptsz"
        ]
    );
}

/// The quick path ([`super::Checked::quick`]) is taken by exactly the rows whose every check has
/// one and one has a step before the call: the CUDA IPC export and the VMM map, unmap and set
/// access. A check with a quick path in many rows (the memory's end) enables none of them alone,
/// and a row of no check or of after-steps only (forwarded or observed before) is not one.
#[test]
fn only_rows_whose_every_check_has_a_quick_path_take_it() {
    macro_rules! quick_rows {
        ($( $sym:ident => $( $family:ident :: $check:ident ),* ; )*) => {
            [$( (stringify!($sym), <args::$sym as super::Checked>::QUICK, args::$sym::ID) ),*]
        };
    }
    use sharecheck_core::functions::CallArgs;
    let rows = sharecheck_core::check_table!(quick_rows);
    let quick: Vec<&str> = rows.iter().filter(|r| r.1).map(|r| r.0).collect();
    assert_eq!(
        quick,
        [
            "cuIpcGetMemHandle",
            "cuMemMap",
            "cuMemUnmap",
            "cuMemSetAccess"
        ]
    );
}
