;; slow: authorize for a path starting "/x" counts down from 500,000,000
;; before it allows: finite, but far past any test's deadline. Other
;; authorize requests, and validate, allow at once. Loaded with
;; limits.interrupt off it shows a late answer failing closed; loaded with it
;; on, the same bytes must be stopped at the deadline (the compilation caches
;; of the two kinds must never be mixed up).
(module
  (memory (export "memory") 1)
  (func (export "plantgate_abi_version") (result i32) (i32.const 1))
  (func (export "plantgate_phases") (result i32) (i32.const 3))
  (func (export "plantgate_buffer") (param $n i32) (result i32) (i32.const 1024))
  (func $count (local $i i32)
    (local.set $i (i32.const 500000000))
    (loop $l
      (local.set $i (i32.sub (local.get $i) (i32.const 1)))
      (br_if $l (local.get $i))))
  ;; $x reports whether the authorize request's path is "/x..." (its second byte is "x").
  (func $x (param $p i32) (result i32)
    (i32.eq (i32.load8_u offset=9 (i32.add (local.get $p) (i32.load (local.get $p)))) (i32.const 0x78)))
  (func (export "plantgate_authorize") (param $p i32) (param i32) (result i64)
    (if (call $x (local.get $p)) (then (call $count)))
    (i64.const 0))
  (func (export "plantgate_validate") (param i32 i32) (result i64) (i64.const 0)))
