;; staticvalidate: validate allows, reading requests into a static buffer of two
;; pages less 1024 bytes (130048) and returning 0 for larger sizes: enough under
;; --body-limit 64 KiB, not under the default 1 MiB.
(module
  (memory (export "memory") 2)
  (func (export "plantgate_abi_version") (result i32) (i32.const 2))
  (func (export "plantgate_phases") (result i32) (i32.const 2))        ;; validate only
  (func (export "plantgate_buffer") (param $size i32) (result i32)
    (if (result i32) (i32.gt_u (local.get $size) (i32.const 130048))
      (then (i32.const 0)) (else (i32.const 1024))))
  (func (export "plantgate_validate") (param i32 i32) (result i64) (i64.const 0)))
