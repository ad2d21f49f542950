;; asciionly: validate traps when the plant's name holds a byte that is not
;; ASCII, as a guest that assumes ASCII text would; allows otherwise
;; (docs/abi.md#the-validate-message). The name is the validate message's
;; first string: a u32 length at offset 12, its bytes from offset 16.
(module
  (memory (export "memory") 18)
  (func (export "plantgate_abi_version") (result i32) (i32.const 2))
  (func (export "plantgate_phases") (result i32) (i32.const 2))
  (func (export "plantgate_buffer") (param i32) (result i32) (i32.const 1024))
  (func (export "plantgate_validate") (param $p i32) (param i32) (result i64)
    (local $i i32) (local $n i32)
    (local.set $n (i32.load offset=12 (local.get $p)))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (if (i32.ge_u (i32.load8_u offset=16 (i32.add (local.get $p) (local.get $i))) (i32.const 0x80)) (then (unreachable)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (i64.const 0)))
