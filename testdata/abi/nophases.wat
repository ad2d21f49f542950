;; nophases: serves no phase at all.
(module
  (memory (export "memory") 1)
  (func (export "plantgate_abi_version") (result i32) (i32.const 1))
  (func (export "plantgate_phases") (result i32) (i32.const 0))
  (func (export "plantgate_buffer") (param $n i32) (result i32) (i32.const 1024)))
