//! One trace record as the report reads it: the members every record is asked for, parsed into
//! typed fields borrowed from the line (`fn`, `event`, numbers), the arguments and findings kept
//! as raw JSON until someone needs them, and the whole object parsed only on demand. Reading a
//! plain call record is then a scan of its bytes, not a tree of `Value`s.
//!
//! Parsing is lenient where the old reader was: a member of an unexpected type reads as absent
//! (it never rejects the line), so that what a person wrote into a trace by hand still reads.

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::cell::OnceCell;
use std::fmt;
use std::marker::PhantomData;

/// The members the report reads of every record.
#[derive(Deserialize, Default)]
pub struct Head<'a> {
    #[serde(default, borrow)]
    pub v: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "lenient")]
    pub seq: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    pub t: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    pub tid: Option<i64>,
    #[serde(rename = "fn", default, borrow, deserialize_with = "lenient")]
    pub func: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "lenient")]
    pub event: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "lenient")]
    pub r: Option<i64>,
    /// The call's time in the driver, ns (`durations=1`).
    #[serde(default, deserialize_with = "lenient")]
    pub d: Option<u64>,
    /// The process record's.
    #[serde(default, deserialize_with = "lenient")]
    pub pid: Option<i64>,
    #[serde(default, deserialize_with = "lenient")]
    pub t0_wall_ns: Option<u64>,
    /// The process record's machine by name.
    #[serde(default, borrow, deserialize_with = "lenient")]
    pub host: Option<Cow<'a, str>>,
    /// The process record's boot of its machine (`/proc/sys/kernel/random/boot_id`).
    #[serde(default, borrow, deserialize_with = "lenient")]
    pub boot_id: Option<Cow<'a, str>>,
    /// A `before-call` event's call.
    #[serde(default, borrow, deserialize_with = "lenient")]
    pub call_fn: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "lenient")]
    pub call_seq: Option<u64>,
    #[serde(default, borrow)]
    pub a: Option<&'a RawValue>,
    #[serde(default, borrow)]
    pub findings: Option<&'a RawValue>,
    /// Where the call was made (`"stack"`), unparsed.
    #[serde(default, borrow)]
    pub stack: Option<&'a RawValue>,
}

/// What a lenient member takes: a number (of its range) or a string; anything else reads as
/// `None`.
trait Pick<'de>: Sized {
    fn unsigned(_: u64) -> Option<Self> {
        None
    }
    fn signed(_: i64) -> Option<Self> {
        None
    }
    fn text(_: Cow<'de, str>) -> Option<Self> {
        None
    }
}

impl Pick<'_> for u64 {
    fn unsigned(v: u64) -> Option<u64> {
        Some(v)
    }
    fn signed(v: i64) -> Option<u64> {
        v.try_into().ok()
    }
}

impl Pick<'_> for i64 {
    fn unsigned(v: u64) -> Option<i64> {
        v.try_into().ok()
    }
    fn signed(v: i64) -> Option<i64> {
        Some(v)
    }
}

/// A string, borrowed from the line where it has no escapes.
impl<'de> Pick<'de> for Cow<'de, str> {
    fn text(v: Cow<'de, str>) -> Option<Self> {
        Some(v)
    }
}

/// A member that reads as `None` when it holds a value of another type (never an error).
fn lenient<'de, D: Deserializer<'de>, T: Pick<'de>>(d: D) -> Result<Option<T>, D::Error> {
    d.deserialize_any(Lenient::<T>(PhantomData))
}

struct Lenient<T>(PhantomData<T>);

impl<'de, T: Pick<'de>> Visitor<'de> for Lenient<T> {
    type Value = Option<T>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(T::unsigned(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(T::signed(v))
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(T::text(Cow::Borrowed(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(T::text(Cow::Owned(v.to_string())))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }
}

/// One trace record, with `pid` and `ts_ns` given by its file's process record.
pub struct Record<'a> {
    text: &'a [u8],
    pub head: Head<'a>,
    pid: Option<i64>,
    ts_ns: Option<u64>,
    /// The machine its process ran on, from its file's process record (its boot id, else its
    /// host name): a pid names a process on one machine only.
    machine: Option<std::rc::Rc<str>>,
    full: OnceCell<Map<String, Value>>,
}

impl<'a> Record<'a> {
    pub fn new(text: &'a [u8], head: Head<'a>, pid: Option<i64>, ts_ns: Option<u64>) -> Self {
        Record {
            text,
            head,
            pid,
            ts_ns,
            machine: None,
            full: OnceCell::new(),
        }
    }

    /// The record, its process on `machine` (see the field).
    pub fn on(mut self, machine: Option<std::rc::Rc<str>>) -> Self {
        self.machine = machine;
        self
    }
    /// The record's line, as read (without its newline).
    pub fn text(&self) -> &[u8] {
        self.text
    }
    /// The machine its process ran on (its file's process record's boot id, else its host).
    pub fn machine(&self) -> Option<&str> {
        self.machine.as_deref()
    }
    pub fn pid(&self) -> Option<i64> {
        self.pid
    }
    /// The wall-clock time of the record (its file's `t0_wall_ns` plus its `t`).
    pub fn ts_ns(&self) -> Option<u64> {
        self.ts_ns
    }
    pub fn seq(&self) -> Option<u64> {
        self.head.seq
    }
    /// Nanoseconds since its process's clock base.
    pub fn t(&self) -> Option<u64> {
        self.head.t
    }
    pub fn tid(&self) -> Option<i64> {
        self.head.tid
    }
    /// The intercepted function; `None` for event records.
    pub fn func(&self) -> Option<&str> {
        self.head.func.as_deref()
    }
    /// The event name of an event record (`process`, `annotation`, `exit`, ...).
    pub fn event(&self) -> Option<&str> {
        self.head.event.as_deref()
    }
    pub fn ret(&self) -> Option<i64> {
        self.head.r
    }
    /// The C name of the returned code (`CUDA_ERROR_INVALID_VALUE`), when the function and the
    /// code are known.
    pub fn ret_name(&self) -> Option<&'static str> {
        let id = sharecheck_core::functions::lookup_symbol(self.func()?.as_bytes())?;
        id.info().api.result_name(i32::try_from(self.ret()?).ok()?)
    }
    /// The arguments as written (`"a"`), unparsed.
    pub fn args_text(&self) -> Option<&str> {
        self.head.a.map(RawValue::get)
    }
    /// The arguments, parsed.
    pub fn args(&self) -> Option<Value> {
        self.head.a.and_then(|a| serde_json::from_str(a.get()).ok())
    }
    /// Whether the record carries findings (without parsing them).
    pub fn has_findings(&self) -> bool {
        self.head.findings.is_some_and(|f| f.get() != "[]")
    }
    /// The record's findings, each a JSON object; anything else in the array is ignored.
    pub fn findings(&self) -> Vec<Map<String, Value>> {
        let Some(raw) = self.head.findings else {
            return Vec::new();
        };
        match serde_json::from_str::<Value>(raw.get()) {
            Ok(Value::Array(items)) => items
                .into_iter()
                .filter_map(|v| match v {
                    Value::Object(m) => Some(m),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        }
    }
    /// The whole record as a JSON object, with `pid` and `ts_ns` (parsed on first use).
    pub fn obj(&self) -> &Map<String, Value> {
        self.full.get_or_init(|| {
            let obj = match serde_json::from_slice::<Value>(self.text) {
                Ok(Value::Object(obj)) => obj,
                _ => Map::new(),
            };
            self.completed(obj)
        })
    }

    /// Where the call was made (`"stack"`) as written, unparsed.
    pub fn stack_text(&self) -> Option<&str> {
        self.head.stack.map(RawValue::get)
    }

    /// The record as a JSON object as [`Record::obj`] gives it, but without its `"stack"`
    /// (scanned, not built: a kept call's stack is most of its line, and calls from one place
    /// share one; [`Record::stack_text`] has it). Not kept.
    pub fn obj_without_stack(&self) -> Map<String, Value> {
        let mut de = serde_json::Deserializer::from_slice(self.text);
        let obj = de.deserialize_map(WithoutStack).unwrap_or_default();
        self.completed(obj)
    }

    /// `obj` with the members its file's process record gives: `pid`, `ts_ns`, `machine`.
    fn completed(&self, mut obj: Map<String, Value>) -> Map<String, Value> {
        if self.head.v.is_none() {
            if let Some(pid) = self.pid {
                obj.insert("pid".into(), pid.into());
            }
        }
        if let Some(ts) = self.ts_ns {
            obj.insert("ts_ns".into(), ts.into());
        }
        if let Some(machine) = &self.machine {
            obj.insert("machine".into(), (**machine).into());
        }
        obj
    }
}

/// A JSON object's members but `"stack"`, which is skipped without being built.
struct WithoutStack;

impl<'de> Visitor<'de> for WithoutStack {
    type Value = Map<String, Value>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut obj = Map::new();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            if key == "stack" {
                map.next_value::<IgnoredAny>()?;
            } else {
                obj.insert(key.into_owned(), map.next_value()?);
            }
        }
        Ok(obj)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str) -> Head<'_> {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn members_of_other_types_read_as_absent_and_strings_are_borrowed() {
        let h = head(
            r#"{"seq":"x","t":[1,{"a":2}],"tid":-3,"fn":"cuMemcpyPeer","r":{"x":1},"event":7}"#,
        );
        assert_eq!((h.seq, h.t, h.tid, h.r), (None, None, Some(-3), None));
        assert!(matches!(h.func, Some(Cow::Borrowed("cuMemcpyPeer"))));
        assert!(h.event.is_none());
        // Escapes are unescaped.
        let h = head(r#"{"fn":"a\u0041"}"#);
        assert_eq!(h.func.as_deref(), Some("aA"));
        // A number too big for its field is absent, not an error.
        assert_eq!(head(r#"{"tid":18446744073709551615}"#).tid, None);
    }

    #[test]
    fn arguments_and_findings_stay_raw_until_asked_for() {
        let text = br#"{"seq":4,"fn":"f","a":{"x":1},"findings":[{"rule":"r"},3],"r":0}"#;
        let h: Head = serde_json::from_slice(text).unwrap();
        let r = Record::new(text, h, Some(42), Some(1000));
        assert_eq!(r.args_text(), Some(r#"{"x":1}"#));
        assert!(r.has_findings());
        assert_eq!(r.findings().len(), 1);
        assert_eq!(r.obj()["pid"], 42);
        assert_eq!(r.obj()["ts_ns"], 1000);
        assert_eq!(r.obj()["seq"], 4);
    }

    /// A call's stack stays raw: the object without it is the whole object less the stack, and
    /// a timeline given the stack apart keeps the call as one given the whole object does (one
    /// parsed copy for the calls of one place).
    #[test]
    fn a_stack_stays_raw_and_a_timeline_takes_it_apart() {
        use sharecheck_core::crossproc::{Timeline, REPORT_CHECKS};
        let line = |seq: u32| {
            format!(
                r#"{{"seq":{seq},"t":{seq},"tid":7,"fn":"cuMemFree_v2","a":{{"dptr":"0x10"}},"r":0,"stack":[{{"module":"/bin/x","offset":"0x1{seq}"}}],"x":[1]}}"#
            )
        };
        let (one, two) = (line(1), line(2));
        let record = |text: &'static str| {
            let h: Head = serde_json::from_str(text).unwrap();
            Record::new(text.as_bytes(), h, Some(42), Some(1000))
        };
        let (one, two): (&'static str, &'static str) = (
            Box::leak(one.into_boxed_str()),
            Box::leak(two.into_boxed_str()),
        );
        let r = record(one);
        assert_eq!(
            r.stack_text(),
            Some(r#"[{"module":"/bin/x","offset":"0x11"}]"#)
        );
        let mut whole = r.obj().clone();
        assert!(whole.remove("stack").is_some());
        assert_eq!(r.obj_without_stack(), whole);
        let mut apart = Timeline::for_checks(REPORT_CHECKS);
        let mut together = Timeline::for_checks(REPORT_CHECKS);
        for text in [one, two, one] {
            let r = record(text);
            apart.add_with_stack(&r.obj_without_stack(), r.stack_text());
            together.add(r.obj());
        }
        apart.finish();
        together.finish();
        let stacks = |t: &Timeline| -> Vec<Value> {
            t.walk()
                .map(|c| (**c.stack.as_ref().unwrap()).clone())
                .collect()
        };
        assert_eq!(stacks(&apart), stacks(&together));
        // In time order: the two calls of line one, then line two's.
        let c: Vec<_> = apart.walk().collect();
        assert!(std::sync::Arc::ptr_eq(
            c[0].stack.as_ref().unwrap(),
            c[1].stack.as_ref().unwrap()
        ));
        assert!(!std::sync::Arc::ptr_eq(
            c[0].stack.as_ref().unwrap(),
            c[2].stack.as_ref().unwrap()
        ));
    }
}
