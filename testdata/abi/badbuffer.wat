;; badbuffer: plantgate_buffer answers 0 (no buffer) for requests under 60
;; bytes and an address outside memory for longer ones.
(module
  (memory (export "memory") 1)
  (func (export "plantgate_abi_version") (result i32) (i32.const 1))
  (func (export "plantgate_phases") (result i32) (i32.const 3))
  (func (export "plantgate_buffer") (param $n i32) (result i32)
    (select (i32.const 0) (i32.const 0xffff0000) (i32.lt_u (local.get $n) (i32.const 60))))
  (func (export "plantgate_authorize") (param i32 i32) (result i64) (i64.const 0))
  (func (export "plantgate_validate") (param i32 i32) (result i64) (i64.const 0)))
