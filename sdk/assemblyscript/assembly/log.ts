// Logging to the host's log, attributed to the plugin.

import { hostLog } from "./host";
import { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR, MAX_LOG } from "./abi";
import { writeUtf8, Utf8, writeValid } from "./utf8";

/** Log levels, log/slog's numbering. */
export enum Level { DEBUG = LOG_DEBUG, INFO = LOG_INFO, WARN = LOG_WARN, ERROR = LOG_ERROR }

const lineBuf = memory.data(MAX_LOG);

/** log writes msg to the host's log. It does not allocate; lines over
 * 4096 bytes are cut. Never log a credential. */
export function log(level: Level, msg: string): void {
  const n = writeUtf8(msg, lineBuf, MAX_LOG);
  hostLog(level, lineBuf, <usize>n);
}

/** logUtf8 logs a view's bytes, such as a request field. */
export function logUtf8(level: Level, msg: Utf8): void {
  const n = writeValid(msg.ptr, msg.len, lineBuf, MAX_LOG);
  hostLog(level, lineBuf, <usize>n);
}
