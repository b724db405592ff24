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
            ///
            /// # Safety
            /// The driver's documented contract for this function (the shim reads an
            /// out-parameter only after the driver succeeded, so it adds no obligation).
            #[no_mangle]
            pub unsafe extern "C" fn $sym( $( $arg: $ty ),* ) -> c_int {
                dispatch::call(args::$sym { $( $arg ),* })
            }

            impl dispatch::Invoke for args::$sym {
                #[inline(always)]
                fn invoke(self, real: usize) -> c_int {
                    // SAFETY: `real` is the driver's export of this exact symbol (the loader
                    // resolves it by this name in the driver library, or adopts what `dlsym`
                    // returned for this name there), and the declaration list spells its C
                    // prototype (tests/abi.rs checks every one against the vendor headers).
                    let f: unsafe extern "C" fn($($ty),*) -> c_int = unsafe { std::mem::transmute(real) };
                    // SAFETY: the caller's own arguments, unchanged: the caller's obligations
                    // under the driver's documented contract are exactly those of calling the
                    // driver directly, and the shim adds none.
                    unsafe { f($( self.$arg ),*) }
                }
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
