;; context: an ABI 2 plugin that reads every version-2 field and echoes
;; them in its deny 40350, so a test sees exactly what was sent.
;; authorize: "<client>|<first header value or ->|<caller name>|<caller scopes>|<request id>"
;; validate:  "<allowed as>|<caller name>|<caller scopes>"
(module
  (memory (export "memory") 1)
  (func (export "plantgate_abi_version") (result i32) (i32.const 2))
  (func (export "plantgate_phases") (result i32) (i32.const 3))
  (func (export "plantgate_buffer") (param $n i32) (result i32)
    (if (result i32) (i32.gt_u (local.get $n) (i32.const 32768))
      (then (i32.const 0)) (else (i32.const 16384))))
  ;; skip returns the address after the length-prefixed string at $p.
  (func $skip (param $p i32) (result i32)
    (i32.add (i32.add (local.get $p) (i32.const 4)) (i32.load (local.get $p))))
  ;; put copies the string at $s to $dst and returns the address after it.
  (func $put (param $dst i32) (param $s i32) (result i32)
    (memory.copy (local.get $dst) (i32.add (local.get $s) (i32.const 4)) (i32.load (local.get $s)))
    (i32.add (local.get $dst) (i32.load (local.get $s))))
  (func $bar (param $dst i32) (result i32)
    (i32.store8 (local.get $dst) (i32.const 124))
    (i32.add (local.get $dst) (i32.const 1)))
  ;; deny returns the Result of a deny 40350 record at 1024 whose text ends at $end.
  (func $deny (param $end i32) (result i64)
    (i32.store (i32.const 1024) (i32.const 1))
    (i32.store (i32.const 1028) (i32.const 40350))
    (i64.or (i64.shl (i64.const 1024) (i64.const 32))
      (i64.extend_i32_u (i32.sub (local.get $end) (i32.const 1024)))))
  (func (export "plantgate_authorize") (param $ptr i32) (param $len i32) (result i64)
    (local $rid i32) (local $client i32) (local $hdrs i32) (local $caller i32) (local $o i32)
    ;; method, path, credential, digest, route, u32 flags, i64 id
    (local.set $rid (i32.add (call $skip (call $skip (call $skip (call $skip (call $skip (local.get $ptr))))))
      (i32.const 12)))
    (local.set $client (call $skip (local.get $rid)))
    (local.set $hdrs (call $skip (local.get $client)))
    (local.set $caller (call $skip (local.get $hdrs)))
    (local.set $o (call $put (i32.const 1032) (local.get $client)))
    (local.set $o (call $bar (local.get $o)))
    (if (i32.eqz (i32.load (local.get $hdrs)))
      (then (i32.store8 (local.get $o) (i32.const 45)) (local.set $o (i32.add (local.get $o) (i32.const 1))))
      ;; the block's first pair: name at $hdrs+4, then its value
      (else (local.set $o (call $put (local.get $o) (call $skip (i32.add (local.get $hdrs) (i32.const 4)))))))
    (local.set $o (call $bar (local.get $o)))
    (local.set $o (call $put (local.get $o) (local.get $caller)))
    (local.set $o (call $bar (local.get $o)))
    (local.set $o (call $put (local.get $o) (call $skip (local.get $caller))))
    (local.set $o (call $bar (local.get $o)))
    (call $deny (call $put (local.get $o) (local.get $rid))))
  (func (export "plantgate_validate") (param $ptr i32) (param $len i32) (result i64)
    (local $as i32) (local $caller i32) (local $o i32)
    ;; i64 id, u32 flags, name, tag, then allowed as
    (local.set $as (call $skip (call $skip (i32.add (local.get $ptr) (i32.const 12)))))
    (local.set $caller (call $skip (local.get $as)))
    (local.set $o (call $bar (call $put (i32.const 1032) (local.get $as))))
    (local.set $o (call $bar (call $put (local.get $o) (local.get $caller))))
    (call $deny (call $put (local.get $o) (call $skip (local.get $caller))))))
