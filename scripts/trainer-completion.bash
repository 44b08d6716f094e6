# bash completion for trainer (installed as share/bash-completion/completions/trainer by
# `cmake --install`; or: source scripts/trainer-completion.bash). Verbs and each verb's flags come
# from `trainer VERB --help`, so they never go stale; values of the flags that take a fixed set
# are listed here, paths are completed as files or directories.
_trainer() {
  local cur prev words cword
  _init_completion 2>/dev/null || {
    cur="${COMP_WORDS[COMP_CWORD]}"
    prev="${COMP_WORDS[COMP_CWORD - 1]}"
    words=("${COMP_WORDS[@]}")
    cword=$COMP_CWORD
  }
  local trainer="${words[0]}"
  # The verbs: the "Subcommands:" of trainer --help.
  local verbs
  verbs=$("$trainer" --help 2>/dev/null | sed -n '/^Subcommands:/,$p' | awk 'NR > 1 && /^  [a-z]/ {print $1}' | tr '\n' ' ')
  local verb="" i
  for ((i = 1; i < cword; i++)); do
    case " $verbs " in *" ${words[i]} "*) verb="${words[i]}"; break ;; esac
  done
  if [ -z "$verb" ]; then
    COMPREPLY=($(compgen -W "$verbs --help --version" -- "$cur"))
    return
  fi
  case "$prev" in
    --device) COMPREPLY=($(compgen -W "cpu gpu auto gpu:0 gpu:1 gpu:2 gpu:3" -- "$cur")); return ;;
    --log-format) COMPREPLY=($(compgen -W "text json" -- "$cur")); return ;;
    --math) COMPREPLY=($(compgen -W "fp32 tf32" -- "$cur")); return ;;
    --split) COMPREPLY=($(compgen -W "validation train" -- "$cur")); return ;;
    --format) COMPREPLY=($(compgen -W "onnx" -- "$cur")); return ;;
    --resume) COMPREPLY=($(compgen -d -- "$cur")); return ;;
    --out) COMPREPLY=($(compgen -f -- "$cur")); compopt -o filenames 2>/dev/null; return ;;
    --weights | --input | --output) COMPREPLY=($(compgen -f -- "$cur")); compopt -o filenames 2>/dev/null; return ;;
    --set | --epochs | --batch-size | --seed | --threads | --mem-limit | --log-every | --steps | --warmup | --title) return ;;
  esac
  if [[ "$cur" == -* ]]; then
    local flags
    flags=$("$trainer" "$verb" --help 2>/dev/null | grep -oE -- '(^|[ ,])--?[a-zA-Z][a-zA-Z-]*' | tr -d ' ,' | sort -u)
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
    return
  fi
  # CONFIG (a .yaml file) or a run directory.
  COMPREPLY=($(compgen -f -X '!*.y*ml' -- "$cur") $(compgen -d -- "$cur"))
  compopt -o filenames 2>/dev/null
}
complete -F _trainer trainer
