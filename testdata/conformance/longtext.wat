;; longtext: validate denies 40350 with a text of 1025 bytes, one over the
;; 1024 a decision's text may hold (docs/abi.md#results-and-decision-records).
(module
  (memory (export "memory") 18)
  ;; verdict 1 (deny), 3 zero bytes, code 40350 (0x9d9e); the text follows.
  (data (i32.const 100) "\01\00\00\00\9e\9d\00\00")
  (func (export "plantgate_abi_version") (result i32) (i32.const 2))
  (func (export "plantgate_phases") (result i32) (i32.const 2))
  (func (export "plantgate_buffer") (param i32) (result i32) (i32.const 4096))
  (func (export "plantgate_validate") (param i32 i32) (result i64)
    (memory.fill (i32.const 108) (i32.const 0x78) (i32.const 1025))
    ;; Result 100<<32 | 8+1025.
    (i64.const 0x0000006400000409)))
