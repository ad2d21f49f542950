;; setcookie: an ABI 2 authorize plugin whose allow carries a response
;; header outside the allow-list (Set-Cookie: a=b); the host must refuse the
;; decision (500 50002), never send the header.
(module
  (memory (export "memory") 1)
  ;; verdict allow, flags DecisionHeaders, code 0, header block of 21 bytes:
  ;; "Set-Cookie" (10) then "a=b" (3); no text.
  (data (i32.const 2048) "\00\01\00\00\00\00\00\00\15\00\00\00\0a\00\00\00Set-Cookie\03\00\00\00a=b")
  (func (export "plantgate_abi_version") (result i32) (i32.const 2))
  (func (export "plantgate_phases") (result i32) (i32.const 1))
  (func (export "plantgate_buffer") (param $n i32) (result i32) (i32.const 4096))
  (func (export "plantgate_authorize") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 2048) (i64.const 32)) (i64.const 33))))
