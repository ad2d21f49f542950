;; leak: validate allows, but grows its memory by one page every 64 calls,
;; as a guest whose heap grows per call does (docs/abi.md#limits-and-failures).
(module
  (memory (export "memory") 18)
  (global $calls (mut i32) (i32.const 0))
  (func (export "plantgate_abi_version") (result i32) (i32.const 2))
  (func (export "plantgate_phases") (result i32) (i32.const 2))
  (func (export "plantgate_buffer") (param i32) (result i32) (i32.const 1024))
  (func (export "plantgate_validate") (param i32 i32) (result i64)
    (global.set $calls (i32.add (global.get $calls) (i32.const 1)))
    (if (i32.eqz (i32.and (global.get $calls) (i32.const 63))) (then (drop (memory.grow (i32.const 1)))))
    (i64.const 0)))
