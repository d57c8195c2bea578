;; Forbidden import.
;; A component implementing the sluice:policy/placement world by hand: `init` and `set-inventory`
;; succeed, `score` returns one score; the component also imports a WASI socket interface, which the host must refuse at load. Used by sdk/tests/sandbox.rs.
(component
  (import "wasi:sockets/tcp@0.2.0" (instance))
  (core module $m
    (memory (export "memory") 32)
    (global $bump (mut i32) (i32.const 65536))
    ;; Bump allocator for the host's lowering of arguments.
    (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
      (local $p i32)
      (local.set $p
        (i32.and
          (i32.add (global.get $bump) (i32.sub (local.get 2) (i32.const 1)))
          (i32.sub (i32.const 0) (local.get 2))))
      (global.set $bump (i32.add (local.get $p) (local.get 3)))
      (local.get $p))
    ;; result<_, string> = ok: the zeroed word at address 0.
    (func (export "init") (param i32 i32) (result i32) (i32.const 0))
    (func (export "set-inventory") (param i32))
    (func (export "score") (param i32) (result i32)
      (i32.const 16))
    ;; An ok result<node-scores, _> at 16 with one score (at 64) and one pod cap (at 72).
    (data (i32.const 16) "\00\00\00\00" "\40\00\00\00" "\01\00\00\00" "\48\00\00\00" "\01\00\00\00"))
  (core instance $i (instantiate $m))
  (alias core export $i "memory" (core memory $mem))
  (alias core export $i "cabi_realloc" (core func $realloc))

  (type $mode-def (enum "none" "required" "preferred" "unconstrained"))
  (export $mode "topology-mode" (type $mode-def))
  (type $req-def (record
    (field "workload" string) (field "pod-set" string) (field "count" u32) (field "min-count" u32)
    (field "resources" (list string)) (field "per-pod" (list s64)) (field "gpus-per-pod" u32)
    (field "topology-mode" $mode) (field "topology-level" (option string))
    (field "nvlink-required" bool) (field "priority" s32)
    (field "label-keys" (list string)) (field "label-values" (list string))))
  (export $req "pod-set-request" (type $req-def))
  (type $inv-def (record
    (field "generation" u64) (field "strings" (list string)) (field "levels" (list u32))
    (field "name" (list u32)) (field "domain" (list u32)) (field "gpu-model" (list u32))
    (field "gpu-memory-mib" (list u64)) (field "fabric-clique" (list u32))
    (field "label-offsets" (list u32)) (field "label-keys" (list u32)) (field "label-values" (list u32))))
  (export $inv "node-inventory" (type $inv-def))
  (type $state-def (record
    (field "ready" (list u8)) (field "gpu-total" (list u32)) (field "gpu-free" (list u32))
    (field "island-offsets" (list u32)) (field "island-size" (list u32))
    (field "island-free" (list u32)) (field "free" (list s64))))
  (export $state "node-state" (type $state-def))
  (type $delta-def (record
    (field "nodes" (list u32)) (field "ready" (list u8)) (field "gpu-total" (list u32))
    (field "gpu-free" (list u32)) (field "island-size" (list u32)) (field "island-free" (list u32))
    (field "free" (list s64))))
  (export $delta "node-state-delta" (type $delta-def))
  (type $scores-def (record (field "score" (list f64)) (field "max-pods" (list u32))))
  (export $scores "node-scores" (type $scores-def))

  (func $init (param "config" string) (result (result (error string)))
    (canon lift (core func $i "init") (memory $mem) (realloc $realloc)))
  (export "init" (func $init))
  (func $set (param "inventory" $inv)
    (canon lift (core func $i "set-inventory") (memory $mem) (realloc $realloc)))
  (export "set-inventory" (func $set))
  (func $score (param "request" $req) (param "state" $state) (result (result $scores (error string)))
    (canon lift (core func $i "score") (memory $mem) (realloc $realloc)))
  (export "score" (func $score))
  ;; `score-delta` shares `score`'s core function: both take one pointer to their arguments.
  (func $score-delta (param "request" $req) (param "delta" $delta) (result (result $scores (error string)))
    (canon lift (core func $i "score") (memory $mem) (realloc $realloc)))
  (export "score-delta" (func $score-delta)))
