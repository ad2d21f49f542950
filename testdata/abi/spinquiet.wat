;; spinquiet: authorize logs one line through plantgate.log, then spins
;; forever without calling the host again: the line tells a test that the
;; guest is in its loop (limits.interrupt on: stopped at the deadline even
;; while a garbage collection waits for it).
(module
  (import "plantgate" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 2048) "spinning")
  (func (export "plantgate_abi_version") (result i32) (i32.const 1))
  (func (export "plantgate_phases") (result i32) (i32.const 1))
  (func (export "plantgate_buffer") (param $n i32) (result i32) (i32.const 1024))
  (func (export "plantgate_authorize") (param i32 i32) (result i64)
    (call $log (i32.const 0) (i32.const 2048) (i32.const 8))
    (loop $l (br $l))
    (i64.const 0)))
