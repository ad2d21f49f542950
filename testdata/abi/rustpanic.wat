;; rustpanic: validate does what a Rust guest's panic!("name too odd: 33")
;; does (rustc 1.63, wasm32-wasi, panic=abort): write the panic line and the
;; backtrace note to stderr through WASI fd_write, then trap with
;; unreachable. The host logs it as one line naming the guest's message.
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 18)
  (data (i32.const 16) "\00\01\00\00\91\00\00\00")
  (data (i32.const 256) "thread '<unnamed>' panicked at 'name too odd: 33', src/lib.rs:5:88\0anote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\0a")
  (func (export "plantgate_abi_version") (result i32) (i32.const 2))
  (func (export "plantgate_phases") (result i32) (i32.const 2))
  (func (export "plantgate_buffer") (param i32) (result i32) (i32.const 1024))
  (func (export "plantgate_validate") (param i32 i32) (result i64)
    (drop (call $fd_write (i32.const 2) (i32.const 16) (i32.const 1) (i32.const 32)))
    (unreachable)))
