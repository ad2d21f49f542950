;; logspam: authorize logs "spam" 100 times at info and allows; validate logs
;; one 5000-byte line of "x" at warn and allows.
(module
  (import "plantgate" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 50000) "spam")
  (func (export "plantgate_abi_version") (result i32) (i32.const 1))
  (func (export "plantgate_phases") (result i32) (i32.const 3))
  (func (export "plantgate_buffer") (param $n i32) (result i32) (i32.const 1024))
  (func (export "plantgate_authorize") (param i32 i32) (result i64)
    (local $i i32)
    (loop $l
      (call $log (i32.const 0) (i32.const 50000) (i32.const 4))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (i32.const 100))))
    (i64.const 0))
  (func (export "plantgate_validate") (param i32 i32) (result i64)
    (memory.fill (i32.const 50100) (i32.const 0x78) (i32.const 5000))
    (call $log (i32.const 4) (i32.const 50100) (i32.const 5000))
    (i64.const 0)))
