;; kvincr: an ABI 2 authorize plugin that calls plantgate.kv_incr on the key
;; "k" (limit or delta 1000000000 / 1, window 60 s) once per call and allows;
;; it traps when the host answers an error (a negative result), so a
;; benchmark of the KV cost cannot pass on errors.
(module
  (import "plantgate" "kv_incr" (func $kv (param i32 i32 i64 i64) (result i64)))
  (memory (export "memory") 1)
  (data (i32.const 0) "k")
  (func (export "plantgate_abi_version") (result i32) (i32.const 2))
  (func (export "plantgate_phases") (result i32) (i32.const 1))
  (func (export "plantgate_buffer") (param $n i32) (result i32) (i32.const 1024))
  (func (export "plantgate_authorize") (param i32 i32) (result i64)
    (if (i64.lt_s (call $kv (i32.const 0) (i32.const 1) (i64.const 1) (i64.const 60000)) (i64.const 0))
      (then unreachable))
    (i64.const 0)))
