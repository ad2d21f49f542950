;; garbage: returns decisions that break the ABI. Authorize picks the kind of
;; garbage by the second byte of the request path ("/o", "/v", ...); any other
;; path allows. Validate always returns an unknown verdict.
(module
  (memory (export "memory") 1)
  (data (i32.const 40000) "\07\00\00\00\00\00\00\00x")                ;; verdict 7
  (data (i32.const 40100) "\01\00\00\00\52\4e\00\00bad code")         ;; deny 20050
  (data (i32.const 40200) "\01\00\00\00\9e\9d\00\00\ff\fe")           ;; deny 40350, not UTF-8
  (data (i32.const 41000) "\01\00\00\00\9e\9d\00\00")                 ;; deny 40350, 1025 text bytes follow
  (func (export "plantgate_abi_version") (result i32) (i32.const 1))
  (func (export "plantgate_phases") (result i32) (i32.const 3))
  (func (export "plantgate_buffer") (param $n i32) (result i32) (i32.const 1024))
  (func (export "plantgate_authorize") (param $p i32) (param $n i32) (result i64)
    (local $c i32)
    ;; path[1]: skip the method string (u32 length + bytes) and the path length.
    (local.set $c (i32.load8_u offset=9 (i32.add (local.get $p) (i32.load (local.get $p)))))
    (if (i32.eq (local.get $c) (i32.const 0x6f)) (then (return (i64.const 0xffff000000000010)))) ;; o: outside memory
    (if (i32.eq (local.get $c) (i32.const 0x76)) (then (return (i64.const 0x00009c4000000009)))) ;; v: verdict
    (if (i32.eq (local.get $c) (i32.const 0x63)) (then (return (i64.const 0x00009ca400000010)))) ;; c: code
    (if (i32.eq (local.get $c) (i32.const 0x73)) (then (return (i64.const 0x00009c4000000004)))) ;; s: short
    (if (i32.eq (local.get $c) (i32.const 0x6c)) (then (return (i64.const 0x0000a02800000409)))) ;; l: long text
    (if (i32.eq (local.get $c) (i32.const 0x75)) (then (return (i64.const 0x00009d080000000a)))) ;; u: UTF-8
    (if (i32.eq (local.get $c) (i32.const 0x7a)) (then (return (i64.const 0x0000fffa00000064)))) ;; z: runs off the end
    (i64.const 0))
  (func (export "plantgate_validate") (param i32 i32) (result i64) (i64.const 0x00009c4000000009)))
