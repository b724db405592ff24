//! Result codes sharecheck names, in one place. CUDA (`CUresult`, cuda.h) and HIP (`hipError_t`,
//! hip_runtime_api.h) give these the same values; where only one API has a code, its doc says so.
//! Names of every code (for records and messages) are in [`crate::names`].

pub const SUCCESS: i32 = 0;
pub const INVALID_VALUE: i32 = 1;
pub const INVALID_DEVICE: i32 = 101;
pub const INVALID_CONTEXT: i32 = 201;
pub const PEER_ACCESS_UNSUPPORTED: i32 = 217;
/// `CUDA_ERROR_ALREADY_MAPPED` / `hipErrorAlreadyMapped`.
pub const ALREADY_MAPPED: i32 = 208;
pub const INVALID_HANDLE: i32 = 400;
pub const NOT_READY: i32 = 600;
pub const PEER_ACCESS_ALREADY_ENABLED: i32 = 704;
pub const PEER_ACCESS_NOT_ENABLED: i32 = 705;
pub const CONTEXT_IS_DESTROYED: i32 = 709;
/// CUDA only: HIP has no TooManyPeers.
pub const TOO_MANY_PEERS: i32 = 711;
/// `CUDA_ERROR_NOT_SUPPORTED` / `hipErrorNotSupported`: what a missing driver function returns.
pub const NOT_SUPPORTED: i32 = 801;
/// `CUDA_ERROR_NOT_PERMITTED`.
pub const NOT_PERMITTED: i32 = 800;
