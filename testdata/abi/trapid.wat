;; trapid: validate executes unreachable when the plant's id is 13 and
;; allows every other plant; it serves no authorize requests. host/http uses
;; it to fault thousands of times and then serve normally.
(module
  (memory (export "memory") 1)
  (func (export "plantgate_abi_version") (result i32) (i32.const 1))
  (func (export "plantgate_phases") (result i32) (i32.const 2))
  (func (export "plantgate_buffer") (param $n i32) (result i32) (i32.const 1024))
  (func (export "plantgate_validate") (param $p i32) (param i32) (result i64)
    (if (i64.eq (i64.load (local.get $p)) (i64.const 13)) (then (unreachable)))
    (i64.const 0)))
