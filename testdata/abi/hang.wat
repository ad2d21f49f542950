;; hang: calls that do not return by their deadline, for limits.interrupt
;; off. authorize on a path starting "/x" looks up the credential's digest
;; with plantgate.token_lookup (a test's token source can hold it there)
;; and then allows; on "/s" it spins forever, calling plantgate.log on every
;; turn. validate spins the same way for plant id 23. Everything else allows.
(module
  (import "plantgate" "log" (func $log (param i32 i32 i32)))
  (import "plantgate" "token_lookup" (func $lookup (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "plantgate_abi_version") (result i32) (i32.const 1))
  (func (export "plantgate_phases") (result i32) (i32.const 3))
  (func (export "plantgate_buffer") (param $n i32) (result i32) (i32.const 1024))
  (func $spin (loop $l (call $log (i32.const -8) (i32.const 0) (i32.const 0)) (br $l)))
  (func $skip (param $p i32) (result i32)
    (i32.add (i32.add (local.get $p) (i32.const 4)) (i32.load (local.get $p))))
  (func (export "plantgate_authorize") (param $p i32) (param i32) (result i64)
    (local $path i32) (local $d i32)
    (local.set $path (i32.load8_u offset=9 (i32.add (local.get $p) (i32.load (local.get $p)))))
    (if (i32.eq (local.get $path) (i32.const 0x73)) (then (call $spin))) ;; "/s"
    (if (i32.eq (local.get $path) (i32.const 0x78)) ;; "/x"
      (then
        ;; $d: the digest's length prefix, after method, path and credential.
        (local.set $d (call $skip (call $skip (call $skip (local.get $p)))))
        (drop (call $lookup (i32.add (local.get $d) (i32.const 4)) (i32.const 32) (i32.const 45000) (i32.const 256)))))
    (i64.const 0))
  (func (export "plantgate_validate") (param $p i32) (param i32) (result i64)
    (if (i64.eq (i64.load (local.get $p)) (i64.const 23)) (then (call $spin)))
    (i64.const 0)))
