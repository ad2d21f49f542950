;; deny: serves both phases and denies everything with 40355 "denied by fixture".
(module
  (memory (export "memory") 1)
  ;; The decision record: verdict 1 (deny), 3 zero bytes, code 40355 (0x9da3), text.
  (data (i32.const 40000) "\01\00\00\00\a3\9d\00\00denied by fixture")
  (func (export "plantgate_abi_version") (result i32) (i32.const 1))
  (func (export "plantgate_phases") (result i32) (i32.const 3))
  (func (export "plantgate_buffer") (param $n i32) (result i32)
    (select (i32.const 1024) (i32.const 0) (i32.le_u (local.get $n) (i32.const 31744))))
  ;; Result 40000<<32 | 25.
  (func (export "plantgate_authorize") (param i32 i32) (result i64) (i64.const 0x00009c4000000019))
  (func (export "plantgate_validate") (param i32 i32) (result i64) (i64.const 0x00009c4000000019)))
