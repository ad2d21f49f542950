;; outside: validate answers a decision record at 0xffff0000, outside its
;; memory of 18 pages (docs/abi.md#results-and-decision-records).
(module
  (memory (export "memory") 18)
  (func (export "plantgate_abi_version") (result i32) (i32.const 2))
  (func (export "plantgate_phases") (result i32) (i32.const 2))
  (func (export "plantgate_buffer") (param i32) (result i32) (i32.const 1024))
  (func (export "plantgate_validate") (param i32 i32) (result i64) (i64.const 0xffff000000000010)))
