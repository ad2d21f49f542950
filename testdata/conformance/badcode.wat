;; badcode: validate denies with 40150, a 401 only the authorize phase may
;; answer (docs/abi.md#results-and-decision-records).
(module
  (memory (export "memory") 18)
  ;; verdict 1 (deny), 3 zero bytes, code 40150 (0x9cd6), text.
  (data (i32.const 100) "\01\00\00\00\d6\9c\00\00who are you?")
  (func (export "plantgate_abi_version") (result i32) (i32.const 2))
  (func (export "plantgate_phases") (result i32) (i32.const 2))
  (func (export "plantgate_buffer") (param i32) (result i32) (i32.const 1024))
  (func (export "plantgate_validate") (param i32 i32) (result i64) (i64.const 0x0000006400000014)))
