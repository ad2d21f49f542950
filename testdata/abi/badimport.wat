;; badimport: imports a host function this host does not provide.
(module
  (import "plantgate" "kv_scan" (func $kv_scan (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "plantgate_abi_version") (result i32) (i32.const 1))
  (func (export "plantgate_phases") (result i32) (i32.const 1))
  (func (export "plantgate_buffer") (param $n i32) (result i32) (i32.const 1024))
  (func (export "plantgate_authorize") (param i32 i32) (result i64) (i64.const 0)))
