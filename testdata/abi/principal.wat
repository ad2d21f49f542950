;; principal: authorize allows as principal "fixture-user"; validate allows.
(module
  (memory (export "memory") 1)
  ;; verdict 0 (allow), 3 zero bytes, code 0, text = the principal.
  (data (i32.const 40000) "\00\00\00\00\00\00\00\00fixture-user")
  (func (export "plantgate_abi_version") (result i32) (i32.const 1))
  (func (export "plantgate_phases") (result i32) (i32.const 3))
  (func (export "plantgate_buffer") (param $n i32) (result i32)
    (select (i32.const 1024) (i32.const 0) (i32.le_u (local.get $n) (i32.const 31744))))
  ;; Result 40000<<32 | 20.
  (func (export "plantgate_authorize") (param i32 i32) (result i64) (i64.const 0x00009c4000000014))
  (func (export "plantgate_validate") (param i32 i32) (result i64) (i64.const 0)))
