;; configure: plantgate_configure keeps the config, refusing one that starts
;; with "f" (JSON false) or is over 1024 bytes. Authorize denies with 40350 and
;; the kept config as text; validate allows.
(module
  (memory (export "memory") 1)
  (data (i32.const 40000) "\02\00\00\00\00\00\00\00config rejected by fixture") ;; fault, 34 bytes
  (data (i32.const 40100) "\02\00\00\00\00\00\00\00config too long")            ;; fault, 23 bytes
  (global $len (mut i32) (i32.const 0))
  (func (export "plantgate_abi_version") (result i32) (i32.const 1))
  (func (export "plantgate_phases") (result i32) (i32.const 3))
  (func (export "plantgate_buffer") (param $n i32) (result i32)
    (select (i32.const 1024) (i32.const 0) (i32.le_u (local.get $n) (i32.const 28000))))
  (func (export "plantgate_configure") (param $p i32) (param $n i32) (result i64)
    (if (i32.gt_u (local.get $n) (i32.const 1024)) (then (return (i64.const 0x00009ca400000017))))
    (if (i32.and (i32.gt_u (local.get $n) (i32.const 0))
                 (i32.eq (i32.load8_u (local.get $p)) (i32.const 0x66)))
      (then (return (i64.const 0x00009c4000000022))))
    (memory.copy (i32.const 30000) (local.get $p) (local.get $n))
    (global.set $len (local.get $n))
    (i64.const 0))
  (func (export "plantgate_authorize") (param i32 i32) (result i64)
    (i32.store (i32.const 41000) (i32.const 1))
    (i32.store (i32.const 41004) (i32.const 40350))
    (memory.copy (i32.const 41008) (i32.const 30000) (global.get $len))
    (i64.or (i64.const 0x0000a02800000000) (i64.extend_i32_u (i32.add (global.get $len) (i32.const 8)))))
  (func (export "plantgate_validate") (param i32 i32) (result i64) (i64.const 0)))
