;; envabort: what AssemblyScript emits by default, an import of env.abort
;; beside otherwise valid exports: refused at load, with the flag that drops it.
(module
  (import "env" "abort" (func $abort (param i32 i32 i32 i32)))
  (memory (export "memory") 1)
  (func (export "plantgate_abi_version") (result i32) (i32.const 2))
  (func (export "plantgate_phases") (result i32) (i32.const 1))
  (func (export "plantgate_buffer") (param i32) (result i32) (i32.const 1024))
  (func (export "plantgate_authorize") (param i32 i32) (result i64) (i64.const 0)))
