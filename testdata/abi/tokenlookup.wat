;; tokenlookup: authorize passes the credential's bytes as the digest to
;; plantgate.token_lookup and allows as the token's name. It denies with
;; 40150 (not found), 50350 (store unavailable), 40151 (bad argument), 40152
;; (record over 256 bytes) or 40353 (revoked). A 33-byte credential asks with
;; its first 32 bytes and an output address outside memory.
(module
  (import "plantgate" "token_lookup" (func $lookup (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 40000) "\01\00\00\00\d6\9c\00\00token not found")         ;; 23 bytes
  (data (i32.const 40100) "\01\00\00\00\ae\c4\00\00token store unavailable") ;; 31 bytes
  (data (i32.const 40200) "\01\00\00\00\d7\9c\00\00bad argument")            ;; 20 bytes
  (data (i32.const 40300) "\01\00\00\00\d8\9c\00\00record too large")        ;; 24 bytes
  (data (i32.const 40400) "\01\00\00\00\a1\9d\00\00token revoked")           ;; 21 bytes
  (func (export "plantgate_abi_version") (result i32) (i32.const 1))
  (func (export "plantgate_phases") (result i32) (i32.const 1))
  (func (export "plantgate_buffer") (param $n i32) (result i32)
    (select (i32.const 1024) (i32.const 0) (i32.le_u (local.get $n) (i32.const 31744))))
  (func $skip (param $p i32) (result i32)
    (i32.add (i32.add (local.get $p) (i32.const 4)) (i32.load (local.get $p))))
  (func (export "plantgate_authorize") (param $p i32) (param $n i32) (result i64)
    (local $s i32) (local $r i32)
    (local.set $s (call $skip (call $skip (local.get $p))))
    (if (i32.eq (i32.load (local.get $s)) (i32.const 33))
      (then (local.set $r (call $lookup (i32.add (local.get $s) (i32.const 4)) (i32.const 32)
                                        (i32.const 0xffffff00) (i32.const 256))))
      (else (local.set $r (call $lookup (i32.add (local.get $s) (i32.const 4)) (i32.load (local.get $s))
                                        (i32.const 45000) (i32.const 256)))))
    (if (i32.eq (local.get $r) (i32.const -1)) (then (return (i64.const 0x00009c4000000017))))
    (if (i32.eq (local.get $r) (i32.const -2)) (then (return (i64.const 0x00009ca40000001f))))
    (if (i32.eq (local.get $r) (i32.const -3)) (then (return (i64.const 0x00009d0800000014))))
    (if (i32.gt_s (local.get $r) (i32.const 256)) (then (return (i64.const 0x00009d6c00000018))))
    (if (i32.and (i32.load (i32.const 45016)) (i32.const 1)) (then (return (i64.const 0x00009dd000000015))))
    ;; Allow as the record's name (offset 52: u32 length, bytes).
    (i64.store (i32.const 46000) (i64.const 0))
    (memory.copy (i32.const 46008) (i32.const 45056) (i32.load (i32.const 45052)))
    (i64.or (i64.const 0x0000b3b000000000)
      (i64.extend_i32_u (i32.add (i32.load (i32.const 45052)) (i32.const 8))))))
