;; phaselie: denies with codes its phase may or may not use (abi.PhaseDenies).
;; authorize: a credential starting "L" is denied 40050 (a 400: authorize
;; cannot judge the body, so the host must refuse it), one starting "R" 42950
;; (a 429, allowed); others allow. validate: plant id 401 is denied 40150 (a
;; 401: refused), 400 is denied 40050 and 429 is denied 42951 (allowed);
;; others allow.
(module
  (memory (export "memory") 1)
  (data (i32.const 40000) "\01\00\00\00\72\9c\00\00authorize cannot see the body") ;; 37 bytes
  (data (i32.const 40100) "\01\00\00\00\c6\a7\00\00slow down")                     ;; 17 bytes
  (data (i32.const 40200) "\01\00\00\00\d6\9c\00\00token not valid here")          ;; 28 bytes
  (data (i32.const 40300) "\01\00\00\00\72\9c\00\00rule says no")                  ;; 20 bytes
  (data (i32.const 40400) "\01\00\00\00\c7\a7\00\00quota reached")                 ;; 21 bytes
  (func (export "plantgate_abi_version") (result i32) (i32.const 1))
  (func (export "plantgate_phases") (result i32) (i32.const 3))
  (func (export "plantgate_buffer") (param $n i32) (result i32) (i32.const 1024))
  (func $skip (param $p i32) (result i32)
    (i32.add (i32.add (local.get $p) (i32.const 4)) (i32.load (local.get $p))))
  (func (export "plantgate_authorize") (param $p i32) (param i32) (result i64)
    (local $c i32)
    ;; $c: the credential's length prefix, after method and path.
    (local.set $c (call $skip (call $skip (local.get $p))))
    (if (i32.eqz (i32.load (local.get $c))) (then (return (i64.const 0))))
    (if (i32.eq (i32.load8_u offset=4 (local.get $c)) (i32.const 0x4c)) ;; "L"
      (then (return (i64.const 0x00009c4000000025))))
    (if (i32.eq (i32.load8_u offset=4 (local.get $c)) (i32.const 0x52)) ;; "R"
      (then (return (i64.const 0x00009ca400000011))))
    (i64.const 0))
  (func (export "plantgate_validate") (param $p i32) (param i32) (result i64)
    (if (i64.eq (i64.load (local.get $p)) (i64.const 401)) (then (return (i64.const 0x00009d080000001c))))
    (if (i64.eq (i64.load (local.get $p)) (i64.const 400)) (then (return (i64.const 0x00009d6c00000014))))
    (if (i64.eq (i64.load (local.get $p)) (i64.const 429)) (then (return (i64.const 0x00009dd000000015))))
    (i64.const 0)))
