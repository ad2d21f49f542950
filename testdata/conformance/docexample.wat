;; docs/abi.md's complete module ("50-no.wat"), byte for byte after this comment:
;; TestPluginConformanceDocExample checks the two agree and that it passes plugin conformance.
(module
  (memory (export "memory") 1)
  ;; the decision record at 0: verdict deny, flags 0, code 40350 (0x9d9e), text "no"
  (data (i32.const 0) "\01\00\00\00\9e\9d\00\00no")
  (func (export "plantgate_abi_version") (result i32) (i32.const 2))
  (func (export "plantgate_phases") (result i32) (i32.const 1))        ;; authorize only
  (func (export "plantgate_buffer") (param $size i32) (result i32)
    ;; requests are written at 1024; one page leaves 64512 bytes there
    (if (result i32) (i32.gt_u (local.get $size) (i32.const 64512))
      (then (i32.const 0)) (else (i32.const 1024))))
  (func (export "plantgate_authorize") (param $ptr i32) (param $len i32) (result i64)
    ;; Result: record address << 32 | record length
    (i64.const 0x0000_0000_0000_000a)))
