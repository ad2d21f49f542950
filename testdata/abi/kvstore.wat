;; kvstore: an ABI 2 validate plugin that makes one KV call chosen by the
;; plant id, on the key = the plant's name, and denies 40350 with what the
;; host answered, so a test sees each answer exactly:
;;   id 1  kv_set(name, tag, ttl 0)        "set=<result>"
;;   id 2  kv_get(name) into 64 bytes       "get=<result>:<value>"
;;   id 3  kv_delete(name)                  "delete=<result>"
;;   id 4  kv_incr(name, 5, 60000)          "incr=<result>"
;;   id 5  nine kv_get(name)                "budget=<result of the ninth>"
;;   id 6  kv_get of an empty key           "empty=<result>"
;;   id 7  kv_get(name) into 1 byte         "short=<result>"
(module
  (import "plantgate" "kv_get" (func $get (param i32 i32 i32 i32) (result i32)))
  (import "plantgate" "kv_set" (func $set (param i32 i32 i32 i32 i64) (result i32)))
  (import "plantgate" "kv_delete" (func $del (param i32 i32) (result i32)))
  (import "plantgate" "kv_incr" (func $incr (param i32 i32 i64 i64) (result i64)))
  (memory (export "memory") 1)
  (data (i32.const 0) "set=")
  (data (i32.const 8) "get=")
  (data (i32.const 16) "delete=")
  (data (i32.const 24) "incr=")
  (data (i32.const 32) "budget=")
  (data (i32.const 40) "empty=")
  (data (i32.const 48) "short=")
  (func (export "plantgate_abi_version") (result i32) (i32.const 2))
  (func (export "plantgate_phases") (result i32) (i32.const 2))
  (func (export "plantgate_buffer") (param $n i32) (result i32)
    (if (result i32) (i32.gt_u (local.get $n) (i32.const 32768))
      (then (i32.const 0)) (else (i32.const 16384))))
  (func $skip (param $p i32) (result i32)
    (i32.add (i32.add (local.get $p) (i32.const 4)) (i32.load (local.get $p))))
  ;; label copies $n bytes of the label at $at to the record's text (1032).
  (func $label (param $at i32) (param $n i32) (result i32)
    (memory.copy (i32.const 1032) (local.get $at) (local.get $n))
    (i32.add (i32.const 1032) (local.get $n)))
  ;; itoa writes $v in decimal at $dst and returns the address after it.
  (func $itoa (param $dst i32) (param $v i64) (result i32)
    (local $n i32) (local $q i64) (local $end i32) (local $p i32)
    (if (i64.lt_s (local.get $v) (i64.const 0))
      (then
        (i32.store8 (local.get $dst) (i32.const 45))
        (local.set $dst (i32.add (local.get $dst) (i32.const 1)))
        (local.set $v (i64.sub (i64.const 0) (local.get $v)))))
    (local.set $n (i32.const 1))
    (local.set $q (local.get $v))
    (block $done (loop $count
      (br_if $done (i64.lt_u (local.get $q) (i64.const 10)))
      (local.set $q (i64.div_u (local.get $q) (i64.const 10)))
      (local.set $n (i32.add (local.get $n) (i32.const 1)))
      (br $count)))
    (local.set $end (i32.add (local.get $dst) (local.get $n)))
    (local.set $p (local.get $end))
    (local.set $q (local.get $v))
    (loop $write
      (local.set $p (i32.sub (local.get $p) (i32.const 1)))
      (i32.store8 (local.get $p) (i32.add (i32.const 48) (i32.wrap_i64 (i64.rem_u (local.get $q) (i64.const 10)))))
      (local.set $q (i64.div_u (local.get $q) (i64.const 10)))
      (br_if $write (i32.ne (local.get $p) (local.get $dst))))
    (local.get $end))
  (func (export "plantgate_validate") (param $ptr i32) (param $len i32) (result i64)
    (local $id i64) (local $name i32) (local $tag i32) (local $o i32) (local $r i32) (local $i i32)
    (local.set $id (i64.load (local.get $ptr)))
    (local.set $name (i32.add (local.get $ptr) (i32.const 12)))
    (local.set $tag (call $skip (local.get $name)))
    (block $out
      (if (i64.eq (local.get $id) (i64.const 1)) (then
        (local.set $o (call $itoa (call $label (i32.const 0) (i32.const 4))
          (i64.extend_i32_s (call $set (i32.add (local.get $name) (i32.const 4)) (i32.load (local.get $name))
            (i32.add (local.get $tag) (i32.const 4)) (i32.load (local.get $tag)) (i64.const 0)))))
        (br $out)))
      (if (i64.eq (local.get $id) (i64.const 2)) (then
        (local.set $r (call $get (i32.add (local.get $name) (i32.const 4)) (i32.load (local.get $name))
          (i32.const 2048) (i32.const 64)))
        (local.set $o (call $itoa (call $label (i32.const 8) (i32.const 4)) (i64.extend_i32_s (local.get $r))))
        (i32.store8 (local.get $o) (i32.const 58))
        (local.set $o (i32.add (local.get $o) (i32.const 1)))
        (if (i32.and (i32.ge_s (local.get $r) (i32.const 0)) (i32.le_s (local.get $r) (i32.const 64))) (then
          (memory.copy (local.get $o) (i32.const 2048) (local.get $r))
          (local.set $o (i32.add (local.get $o) (local.get $r)))))
        (br $out)))
      (if (i64.eq (local.get $id) (i64.const 3)) (then
        (local.set $o (call $itoa (call $label (i32.const 16) (i32.const 7))
          (i64.extend_i32_s (call $del (i32.add (local.get $name) (i32.const 4)) (i32.load (local.get $name))))))
        (br $out)))
      (if (i64.eq (local.get $id) (i64.const 4)) (then
        (local.set $o (call $itoa (call $label (i32.const 24) (i32.const 5))
          (call $incr (i32.add (local.get $name) (i32.const 4)) (i32.load (local.get $name)) (i64.const 5) (i64.const 60000))))
        (br $out)))
      (if (i64.eq (local.get $id) (i64.const 5)) (then
        (local.set $i (i32.const 0))
        (loop $nine
          (local.set $r (call $get (i32.add (local.get $name) (i32.const 4)) (i32.load (local.get $name))
            (i32.const 2048) (i32.const 64)))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br_if $nine (i32.lt_u (local.get $i) (i32.const 9))))
        (local.set $o (call $itoa (call $label (i32.const 32) (i32.const 7)) (i64.extend_i32_s (local.get $r))))
        (br $out)))
      (if (i64.eq (local.get $id) (i64.const 6)) (then
        (local.set $o (call $itoa (call $label (i32.const 40) (i32.const 6))
          (i64.extend_i32_s (call $get (i32.add (local.get $name) (i32.const 4)) (i32.const 0) (i32.const 2048) (i32.const 64)))))
        (br $out)))
      (local.set $o (call $itoa (call $label (i32.const 48) (i32.const 6))
        (i64.extend_i32_s (call $get (i32.add (local.get $name) (i32.const 4)) (i32.load (local.get $name))
          (i32.const 2048) (i32.const 1))))))
    (i32.store (i32.const 1024) (i32.const 1))
    (i32.store (i32.const 1028) (i32.const 40350))
    (i64.or (i64.shl (i64.const 1024) (i64.const 32))
      (i64.extend_i32_u (i32.sub (local.get $o) (i32.const 1024))))))
