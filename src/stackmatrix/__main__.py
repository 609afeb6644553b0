from stackmatrix.cli import main

raise SystemExit(main())
