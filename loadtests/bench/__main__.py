from loadtests.bench.cli import main

raise SystemExit(main())
