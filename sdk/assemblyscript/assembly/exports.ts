// The exports the host calls. A plugin's entry file re-exports them:
//
//     export * from "@plantgate/sdk-assemblyscript/exports";
//
// Nothing here allocates per call: the request buffer grows only when the
// host asks for more than it ever did, and decisions are encoded into a
// static record.

import { ABI_VERSION } from "./abi";
// Compiled into every plugin, for --use abort=.../abort/abort.
import "./abort";
import { phases, callConfigure, callAuthorize, callValidate, configIsRequired } from "./handlers";

const MIN_REQUEST: i32 = 4 << 10;
const MAX_REQUEST: i32 = 16 << 20;

// The buffer plantgate_buffer hands out: a static 4 KiB first, a larger
// heap block once a request needs it. It moves only when asked for more
// than its size, which the ABI allows.
let bufPtr: usize = memory.data(MIN_REQUEST, 16);
let bufCap: i32 = MIN_REQUEST;

export function plantgate_abi_version(): i32 {
  return ABI_VERSION;
}

export function plantgate_phases(): i32 {
  return phases();
}

// Answers 1 after requireConfig(): the host then refuses to load the
// plugin without a config (a host before this export ignores it).
export function plantgate_config_required(): i32 {
  return configIsRequired();
}

export function plantgate_buffer(size: i32): usize {
  if (size < 0 || size > MAX_REQUEST) return 0;
  if (size > bufCap) {
    let n = bufCap;
    while (n < size) n <<= 1;
    // The old block is not freed when it is the static one; a heap one is.
    if (bufCap > MIN_REQUEST) heap.free(bufPtr);
    bufPtr = heap.alloc(<usize>n);
    bufCap = n;
  }
  return bufPtr;
}

export function plantgate_configure(ptr: usize, len: i32): u64 {
  return callConfigure(ptr, len);
}

export function plantgate_authorize(ptr: usize, len: i32): u64 {
  return callAuthorize(ptr, len);
}

export function plantgate_validate(ptr: usize, len: i32): u64 {
  return callValidate(ptr, len);
}
