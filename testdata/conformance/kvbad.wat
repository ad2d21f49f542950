;; kvbad: validate calls plantgate.kv_get with an empty key, a bad argument
;; the host answers -3 for (docs/abi.md#kv), then allows.
(module
  (import "plantgate" "kv_get" (func $kv_get (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 18)
  (func (export "plantgate_abi_version") (result i32) (i32.const 2))
  (func (export "plantgate_phases") (result i32) (i32.const 2))
  (func (export "plantgate_buffer") (param i32) (result i32) (i32.const 1024))
  (func (export "plantgate_validate") (param i32 i32) (result i64)
    (drop (call $kv_get (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)))
    (i64.const 0)))
