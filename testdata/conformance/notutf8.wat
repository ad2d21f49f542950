;; notutf8: validate denies 40350 with a text that is not UTF-8 (Latin-1
;; "élé"), as a guest that does not encode its strings as UTF-8 would
;; (docs/abi.md#results-and-decision-records).
(module
  (memory (export "memory") 18)
  (data (i32.const 100) "\01\00\00\00\9e\9d\00\00\e9l\e9")
  (func (export "plantgate_abi_version") (result i32) (i32.const 2))
  (func (export "plantgate_phases") (result i32) (i32.const 2))
  (func (export "plantgate_buffer") (param i32) (result i32) (i32.const 1024))
  (func (export "plantgate_validate") (param i32 i32) (result i64) (i64.const 0x000000640000000b)))
