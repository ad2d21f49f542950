;; loop: validate, and authorize for a path starting "/x", spin forever: only
;; the per-call deadline ends them. Other authorize requests allow.
(module
  (memory (export "memory") 1)
  (func (export "plantgate_abi_version") (result i32) (i32.const 1))
  (func (export "plantgate_phases") (result i32) (i32.const 3))
  (func (export "plantgate_buffer") (param $n i32) (result i32) (i32.const 1024))
  (func $spin (loop $l (br $l)))
  ;; $x reports whether the authorize request's path is "/x..." (its second byte is "x").
  (func $x (param $p i32) (result i32)
    (i32.eq (i32.load8_u offset=9 (i32.add (local.get $p) (i32.load (local.get $p)))) (i32.const 0x78)))
  (func (export "plantgate_authorize") (param $p i32) (param i32) (result i64)
    (if (call $x (local.get $p)) (then (call $spin)))
    (i64.const 0))
  (func (export "plantgate_validate") (param i32 i32) (result i64) (call $spin) (i64.const 0)))
