// AssemblyScript calls abort(message, file, line, column) on a failed
// assertion, an out-of-bounds access or an out-of-memory; by default it
// imports it as env.abort, and the host provides no "env" module. Build
// with
//
//     --use abort=<path of this file without .ts>/abort
//
// (asconfig.json "use": ["abort=node_modules/@plantgate/sdk-assemblyscript/assembly/abort/abort"])
// so abort is this function instead.

import { LOG_ERROR, MAX_LOG } from "./abi";
import { hostLog } from "./host";
import { writeUtf8 } from "./utf8";

/** abort replaces AssemblyScript's env.abort (the host provides no "env"
 * module): build with --use abort=<this module>/abort. It logs the failure
 * through plantgate.log at ERROR and traps, which the host answers as a
 * plugin fault: fail closed. It writes into a static line, without
 * allocating, as it may run out of memory. */
export function abort(message: string | null, fileName: string | null, line: u32, column: u32): void {
  const buf = memory.data(MAX_LOG);
  let n = writeUtf8("abort: ", buf, MAX_LOG);
  n += writeUtf8(message != null ? message : "(no message)", buf + <usize>n, MAX_LOG - n);
  if (fileName != null) {
    n += writeUtf8(" at ", buf + <usize>n, MAX_LOG - n);
    n += writeUtf8(fileName, buf + <usize>n, MAX_LOG - n);
    n += writeUtf8(":", buf + <usize>n, MAX_LOG - n);
    n += writeNumber(line, buf + <usize>n, MAX_LOG - n);
    n += writeUtf8(":", buf + <usize>n, MAX_LOG - n);
    n += writeNumber(column, buf + <usize>n, MAX_LOG - n);
  }
  hostLog(LOG_ERROR, buf, <usize>n);
  unreachable();
}

function writeNumber(v: u32, dst: usize, cap: i32): i32 {
  const tmp = memory.data(10);
  let p = tmp + 10;
  do {
    p--;
    store<u8>(p, <u8>(0x30 + v % 10));
    v /= 10;
  } while (v != 0);
  let n = <i32>(tmp + 10 - p);
  if (n > cap) n = cap;
  memory.copy(dst, p, <usize>n);
  return n;
}
