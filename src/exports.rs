//! The exported wrappers: one per line of `sharecheck_core::interposed_functions!`.

#![allow(non_snake_case)]

use crate::dispatch;
use sharecheck_core::ffi::*;
use sharecheck_core::functions::{args, FnId};
use std::ffi::c_int;

macro_rules! define_exports {
    ($( $api:ident $sym:ident [$base:ident $since:literal $variant:ident $($role:ident)?] ( $( $arg:ident : $ty:ty ),* $(,)? ); )*) => {
        $(
            /// Interposed: forwarded unchanged to the real driver, traced and checked.
            #[no_mangle]
            pub unsafe extern "C" fn $sym( $( $arg: $ty ),* ) -> c_int {
                let call_args = args::$sym { $( $arg ),* };
                dispatch::call(call_args, |real| {
                    // SAFETY: `real` is the driver's export of this exact symbol (same ABI).
                    let f: unsafe extern "C" fn($($ty),*) -> c_int = unsafe { std::mem::transmute(real) };
                    unsafe { f($( call_args.$arg ),*) }
                })
            }
        )*

        /// The shim's wrapper for an interposed symbol.
        pub fn wrapper_address(id: FnId) -> usize {
            match id {
                $( FnId::$sym => $sym as *const () as usize, )*
            }
        }
    };
}

sharecheck_core::interposed_functions!(define_exports);
