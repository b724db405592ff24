//! The rule catalogue: one entry per documented requirement the shim checks, split by family.
//!
//! Each rule has a stable ID (its meaning never changes once released; a changed requirement gets
//! a new ID), a severity, a kind, the requirement in our words, the documented sentence it rests
//! on and where that sentence is written, and a fix hint. Rules belong to a [`Family`] (one file
//! each: [`peer`], [`divergences`]); [`all`] assembles the catalogue from [`FAMILIES`]. Which
//! functions a rule is checked on is not written here: it follows from the check table
//! ([`crate::table`]), whose checks name the rules they report ([`CheckInfo`]). A known driver
//! divergence is data ([`KnownDivergence`], [`divergences::KNOWN`]). `sharecheck rules` prints the
//! catalogue, and RULES.md is that output, kept equal by a test.

pub mod attach;
pub mod divergences;
pub mod endpoint;
pub mod general;
pub mod ipc;
pub mod lifecycle;
pub mod multicast;
pub mod peer;
pub mod pool;
pub mod vmm;

use crate::functions::FnInfo;

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Harmless or explanatory: a query with no effect on later calls (a device asked about
    /// itself), a note on what a call did, an explained failure, a known driver divergence.
    Info,
    /// Undefined by the documents, or silently other than the program meant.
    Warning,
    /// A documented requirement is broken, so the call fails or its result is not what the
    /// program meant (whether or not the driver noticed).
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
    pub fn parse(s: &str) -> Option<Severity> {
        [Severity::Info, Severity::Warning, Severity::Error]
            .into_iter()
            .find(|v| v.as_str() == s)
    }
}

/// Whose fault a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The program broke a documented requirement.
    Misuse,
    /// The driver answered other than its documentation says.
    Divergence,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Misuse => "misuse",
            Kind::Divergence => "divergence",
        }
    }
}

/// Where the requirement is written.
#[derive(Clone, Copy, Debug)]
pub struct Source {
    /// `CUDA Driver API` or `HIP Runtime API`.
    pub document: &'static str,
    /// The section of that document.
    pub section: &'static str,
    /// The function whose documentation holds the sentence.
    pub function: &'static str,
}

impl Source {
    /// `CUDA Driver API, Peer Context Memory Access, cuCtxEnablePeerAccess`.
    pub fn cite(&self) -> String {
        format!("{}, {}, {}", self.document, self.section, self.function)
    }

    /// The vendor's page of the section that documents the function, where one is known: NVIDIA's
    /// CUDA Driver API reference has a page per section (its functions are anchors in it). None
    /// for the HIP runtime (its reference moves between ROCm releases) and for sections NVIDIA
    /// has not published (the 13.3 logical endpoints).
    pub fn url(&self) -> Option<String> {
        if self.document != "CUDA Driver API" {
            return None;
        }
        let group = match self.section {
            "Memory Management" => "MEM",
            "Peer Context Memory Access" => "PEER__ACCESS",
            "Virtual Memory Management" => "VA",
            "Stream Ordered Memory Allocator" => "MALLOC__ASYNC",
            "Stream Management" => "STREAM",
            "Event Management" => "EVENT",
            "Context Management" => "CTX",
            "Unified Addressing" => "UNIFIED",
            "Multicast Object Management" => "MULTICAST",
            "Error codes" => "TYPES",
            _ => return None,
        };
        Some(format!(
            "https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__{group}.html"
        ))
    }
}

/// One checked requirement.
#[derive(Debug)]
pub struct Rule {
    /// Stable ID: `<function>.<condition>`, `peer-access.<condition>` or `divergence.<...>`.
    pub id: &'static str,
    pub severity: Severity,
    pub kind: Kind,
    /// The requirement, in this project's words.
    pub requirement: &'static str,
    pub source: Source,
    /// The documented sentence(s) the rule rests on, verbatim.
    pub quote: &'static str,
    /// What the documentation says the call returns when the requirement is broken: the code
    /// `mode=strict` returns instead of calling the driver. `None` where it names none.
    pub documented_code: Option<i32>,
    pub fix: &'static str,
}

pub(crate) const fn cuda(section: &'static str, function: &'static str) -> Source {
    Source {
        document: "CUDA Driver API",
        section,
        function,
    }
}

pub(crate) const fn hip(function: &'static str) -> Source {
    hip_in(peer::HIP_PEER, function)
}

pub(crate) const fn hip_in(section: &'static str, function: &'static str) -> Source {
    Source {
        document: "HIP Runtime API",
        section,
        function,
    }
}

/// HIP rules "flags must be 0", one per function: `name = "function";` with the document's
/// sentence (HIP 5.2 words it per family) and the ROCm 6.2 runtime's refusal.
macro_rules! hip_flags_not_zero {
    ($section:expr, $quote:expr; $($name:ident = $function:literal;)*) => {$(
        pub static $name: $crate::rules::Rule = $crate::rules::Rule {
            id: concat!($function, ".flags-not-zero"),
            severity: $crate::rules::Severity::Error,
            kind: $crate::rules::Kind::Misuse,
            requirement: "flags is 0. The ROCm 6.2 runtime answers hipErrorInvalidValue.",
            source: $crate::rules::hip_in($section, $function),
            quote: $quote,
            documented_code: Some($crate::codes::INVALID_VALUE),
            fix: "pass 0 as flags",
        };
    )*};
}
pub(crate) use hip_flags_not_zero;

/// A family of rules: one unit of checks, catalogue and state (peer access, IPC, ...). Its rules
/// are not listed again: they are those its checks report, those decided in the report phase,
/// those the engine reports itself, and its known divergences ([`Family::rules`]).
#[derive(Debug)]
pub struct Family {
    /// Short name: `peer`, `divergences`, ...
    pub name: &'static str,
    pub title: &'static str,
    /// The family's checks, each with the rules it can report, in catalogue order.
    pub checks: &'static [&'static CheckInfo],
    /// Rules decided in the report phase, over the traces of every process, each with the exact
    /// symbols whose calls its findings are attached to.
    pub reported: &'static [(&'static Rule, &'static [&'static str])],
    /// Rules the engine reports itself, whichever check ran (`call.failed`, `divergence.unlisted`).
    pub engine: &'static [&'static Rule],
    /// Known driver divergences: data, each a rule.
    pub divergences: &'static [KnownDivergence],
}

impl Family {
    /// Every rule of the family, in catalogue order, each once: its checks' (in order), the
    /// report phase's, the engine's, its divergences'.
    pub fn rules(&self) -> Vec<&'static Rule> {
        let mut rules: Vec<&'static Rule> = Vec::new();
        let listed = self.checks.iter().flat_map(|c| c.rules.iter().copied());
        let reported = self.reported.iter().map(|(r, _)| *r);
        let known = self.divergences.iter().map(|d| d.rule);
        for rule in listed
            .chain(reported)
            .chain(self.engine.iter().copied())
            .chain(known)
        {
            if !rules.iter().any(|r| std::ptr::eq(*r, rule)) {
                rules.push(rule);
            }
        }
        rules
    }
}

/// One check: a unit of the shim that runs on the functions the table gives it, and the rules it
/// can report.
#[derive(Debug)]
pub struct CheckInfo {
    /// `family.what[.api]`.
    pub name: &'static str,
    pub rules: &'static [&'static Rule],
}

/// A driver answers a misuse with another code than its documentation gives.
#[derive(Debug)]
pub struct KnownDivergence {
    /// The `divergence.*` rule that reports it.
    pub rule: &'static Rule,
    /// The misuse whose documented code the driver does not return.
    pub misuse: &'static Rule,
    /// The driver (and version) seen answering so.
    pub driver: &'static str,
    /// What that driver returns instead.
    pub returns: i32,
}

/// Misuse reported before the call is forwarded rather than settled after it, in any family: a
/// known driver may not return from the call (R580 dies of SIGSEGV inside
/// `cuStreamAttachMemAsync` with flags 0, and inside `cuMemPoolExportPointer` of a FABRIC pool
/// whose export it refused; the ROCm 6.2 runtime's second `hipMemRelease` of a handle is a use
/// after free, and its `hipMemAddressFree` of an address that is no reservation's start
/// dereferences the entry it does not find), so a finding made after it might never be seen.
/// Only a finding that is certain is reported before.
pub static REPORTED_BEFORE_CALL: &[&Rule] = &[
    &attach::cuda::FLAGS_NOT_ONE,
    &vmm::hip::RELEASE_NOT_HELD,
    &vmm::hip::ADDRESS_FREE_NOT_RESERVATION,
    &pool::cuda::EXPORT_POINTER_NOT_SHARED,
];

/// Every family, in catalogue order.
pub static FAMILIES: &[&Family] = &[
    &peer::FAMILY,
    &ipc::FAMILY,
    &attach::FAMILY,
    &endpoint::FAMILY,
    &vmm::FAMILY,
    &pool::FAMILY,
    &multicast::FAMILY,
    &general::FAMILY,
    &divergences::FAMILY,
];

/// Symbol prefixes of the calls `sharecheck report`'s cross-process checks read: every call of
/// the IPC and logical endpoint families (their records carry the handles' fingerprints) and the
/// frees, closes and destructions that end what they exported or opened. A trace at
/// `trace_level=findings` keeps these besides the calls with findings.
pub const REPORT_READS: &[&str] = &[
    "cuIpc",
    "hipIpc",
    "cuLogicalEndpoint",
    "cuMemFree",
    "hipFree",
    "cuCtxDestroy",
    "cuEventDestroy",
    "hipEventDestroy",
    "cuMemCreate",
    "cuMemRelease",
    "cuMemRetainAllocationHandle",
    "cuMemImportFromShareableHandle",
    "cuMulticastCreate",
    "cuMemAddressReserve",
    "cuMemAddressFree",
    "cuMemMap",
    "cuMemUnmap",
    "cuMemExportToShareableHandle",
    "hipMemCreate",
    "hipMemRelease",
    "hipMemRetainAllocationHandle",
    "hipMemImportFromShareableHandle",
    "hipMemAddressReserve",
    "hipMemAddressFree",
    "hipMemMap",
    "hipMemUnmap",
    "cuMemPoolExportPointer",
    "cuMemPoolImportPointer",
    "hipMemPoolExportPointer",
    "hipMemPoolImportPointer",
];

/// Functions a report-phase rule accuses that programs call often (a free, an export, a map, an
/// event's destroy): the shim keeps their stack in the trace only where a check says the call
/// concerns what other processes share or what a report may name (the first export of a pointer,
/// the free of exported memory, the first map of a handle). Every other accused function's calls
/// keep theirs.
pub const ACCUSED_ON_REQUEST: &[&str] = &[
    "cuMemFree_v2",
    "hipFree",
    "cuMemFreeAsync",
    "cuMemFreeAsync_ptsz",
    "cuIpcGetMemHandle",
    "hipIpcGetMemHandle",
    "cuMemMap",
    "cuEventDestroy_v2",
    "hipEventDestroy",
];

/// Whether a report-phase rule may attach a finding to this function's calls, and when their
/// stacks are kept for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accused {
    Never,
    /// Every call's stack is kept.
    Always,
    /// Kept where a check asks ([`ACCUSED_ON_REQUEST`]).
    OnRequest,
}

/// [`Accused`] of a function, from the families' `reported` lists; decided at compile time for
/// each wrapped function (a traced call reads no table to know it).
pub const fn accused(symbol: &str) -> Accused {
    const fn same(a: &str, b: &str) -> bool {
        let (a, b) = (a.as_bytes(), b.as_bytes());
        if a.len() != b.len() {
            return false;
        }
        let mut i = 0;
        while i < a.len() {
            if a[i] != b[i] {
                return false;
            }
            i += 1;
        }
        true
    }
    const fn listed(symbol: &str, list: &[&str]) -> bool {
        let mut i = 0;
        while i < list.len() {
            if same(symbol, list[i]) {
                return true;
            }
            i += 1;
        }
        false
    }
    let mut named = false;
    let mut f = 0;
    while f < FAMILIES.len() {
        let reported = FAMILIES[f].reported;
        let mut r = 0;
        while r < reported.len() {
            named = named || listed(symbol, reported[r].1);
            r += 1;
        }
        f += 1;
    }
    match (named, listed(symbol, ACCUSED_ON_REQUEST)) {
        (false, _) => Accused::Never,
        (true, false) => Accused::Always,
        (true, true) => Accused::OnRequest,
    }
}

/// Whether a report-phase check reads this function's calls ([`REPORT_READS`]).
pub fn read_by_report(info: &FnInfo) -> bool {
    reads_by_report(info.id)
}

/// [`read_by_report`] of a function by its id, in a constant (a traced call's record asks it
/// without reading the function's table row).
pub const fn reads_by_report(id: crate::functions::FnId) -> bool {
    let symbol = id.symbol().as_bytes();
    let mut i = 0;
    while i < REPORT_READS.len() {
        let prefix = REPORT_READS[i].as_bytes();
        if prefix.len() <= symbol.len() {
            let mut j = 0;
            while j < prefix.len() && prefix[j] == symbol[j] {
                j += 1;
            }
            if j == prefix.len() {
                return true;
            }
        }
        i += 1;
    }
    false
}

/// Every rule, in catalogue order.
pub fn all() -> impl Iterator<Item = &'static Rule> {
    FAMILIES.iter().flat_map(|f| f.rules())
}

/// The family whose tests stage a rule: the one that defines it or, for a known divergence, the
/// one that defines its misuse.
pub fn home_family(rule: &Rule) -> Option<&'static Family> {
    let target: &Rule = divergences::KNOWN
        .iter()
        .find(|d| std::ptr::eq(d.rule, rule))
        .map_or(rule, |d| d.misuse);
    FAMILIES
        .iter()
        .copied()
        .find(|f| f.rules().iter().any(|r| std::ptr::eq(*r, target)))
}

/// The rules whose home is one of `families` ([`home_family`]) and whose ID is not in `covered`:
/// what a family's tests have yet to stage.
pub fn without_case<'a>(
    families: &[&str],
    covered: impl IntoIterator<Item = &'a str>,
) -> Vec<&'static str> {
    let covered: std::collections::BTreeSet<&str> = covered.into_iter().collect();
    all()
        .filter(|r| home_family(r).is_some_and(|f| families.contains(&f.name)))
        .map(|r| r.id)
        .filter(|id| !covered.contains(id))
        .collect()
}

/// Looks a rule up by ID.
pub fn by_id(id: &str) -> Option<&'static Rule> {
    all().find(|r| r.id == id)
}

/// The known divergence of a misuse for a driver's answer.
pub fn known_divergence(misuse: &Rule, returns: i32) -> Option<&'static KnownDivergence> {
    divergences::KNOWN
        .iter()
        .find(|d| d.returns == returns && std::ptr::eq(d.misuse, misuse))
}

/// The rules whose ID contains `text` (for "did you mean").
pub fn ids_containing(text: &str) -> Vec<&'static str> {
    all().map(|r| r.id).filter(|id| id.contains(text)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Which calls keep their stack for the report: the rare calls a report-phase rule names
    /// always, the frequent ones on request, the others never.
    #[test]
    fn accused_functions_follow_the_reported_lists() {
        assert_eq!(accused("cuIpcOpenMemHandle_v2"), Accused::Always);
        assert_eq!(accused("cuMemCreate"), Accused::Always);
        assert_eq!(accused("cuMemFree_v2"), Accused::OnRequest);
        assert_eq!(accused("cuMemMap"), Accused::OnRequest);
        assert_eq!(accused("cuDeviceCanAccessPeer"), Accused::Never);
        assert_eq!(accused("cuMemFre"), Accused::Never, "whole names only");
        // Every on-request function is one a rule names.
        for f in ACCUSED_ON_REQUEST {
            assert_eq!(accused(f), Accused::OnRequest, "{f}");
        }
    }
    use std::collections::HashSet;

    #[test]
    fn ids_are_unique_and_well_formed() {
        let mut seen = HashSet::new();
        for rule in all() {
            assert!(seen.insert(rule.id), "duplicate rule id {}", rule.id);
            assert!(
                rule.id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-'),
                "{}",
                rule.id
            );
            assert_eq!(
                rule.kind == Kind::Divergence,
                rule.id.starts_with("divergence."),
                "{}",
                rule.id
            );
            assert!(!rule.quote.is_empty() && !rule.fix.is_empty() && !rule.requirement.is_empty());
        }
    }

    #[test]
    fn divergences_are_info_and_by_id_finds_every_rule() {
        for rule in all() {
            if rule.kind == Kind::Divergence {
                assert_eq!(rule.severity, Severity::Info, "{}", rule.id);
            }
            assert!(std::ptr::eq(by_id(rule.id).unwrap(), rule));
        }
        assert!(by_id("no.such-rule").is_none());
    }
}
