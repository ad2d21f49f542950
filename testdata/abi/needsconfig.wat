;; needsconfig: declares its config required (plantgate_config_required
;; answers 1) and accepts any config; validate allows. Loading it without a
;; config is refused.
(module
  (memory (export "memory") 1)
  (func (export "plantgate_abi_version") (result i32) (i32.const 2))
  (func (export "plantgate_phases") (result i32) (i32.const 2))
  (func (export "plantgate_config_required") (result i32) (i32.const 1))
  (func (export "plantgate_buffer") (param i32) (result i32) (i32.const 1024))
  (func (export "plantgate_configure") (param i32 i32) (result i64) (i64.const 0))
  (func (export "plantgate_validate") (param i32 i32) (result i64) (i64.const 0)))
