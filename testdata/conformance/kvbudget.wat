;; kvbudget: validate calls plantgate.kv_get on the key "k" 40 times, past
;; the budget of KV calls one phase call may make (docs/abi.md#kv), then
;; allows.
(module
  (import "plantgate" "kv_get" (func $kv_get (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 18)
  (data (i32.const 16) "k")
  (func (export "plantgate_abi_version") (result i32) (i32.const 2))
  (func (export "plantgate_phases") (result i32) (i32.const 2))
  (func (export "plantgate_buffer") (param i32) (result i32) (i32.const 1024))
  (func (export "plantgate_validate") (param i32 i32) (result i64)
    (local $i i32)
    (loop $next
      (drop (call $kv_get (i32.const 16) (i32.const 1) (i32.const 32) (i32.const 64)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $next (i32.lt_u (local.get $i) (i32.const 40))))
    (i64.const 0)))
