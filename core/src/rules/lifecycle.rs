//! The engine's own observers: calls that end (or begin) something the families track. They
//! report no rule; each tells every family (`Lifetime` events in the shim) so tracked state ends
//! with what it belongs to.

pub mod checks {
    use crate::rules::CheckInfo;

    macro_rules! observers {
        ($($name:ident = $text:literal;)*) => {
            $( pub static $name: CheckInfo = CheckInfo { name: $text, rules: &[] }; )*
        };
    }

    observers! {
        CONTEXT_DESTROYED = "lifecycle.context-destroyed";
        PRIMARY_RELEASED = "lifecycle.primary-context-released";
        PRIMARY_RESET = "lifecycle.primary-context-reset";
        STREAM_DESTROYED = "lifecycle.stream-destroyed";
        HIP_DEVICE_RESET = "lifecycle.hip-device-reset";
        MEMORY_FREED = "lifecycle.memory-freed";
        POINTER_FREED = "lifecycle.pointer-freed";
    }
}
