package main

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/exo-rack/exo/broadcast/frames"
	"github.com/exo-rack/exo/exo"
)

// exo frame: craft, send, dump and replay raw Exo frames by hand
// (docs/frames.md). Every field is checked before anything is written or
// sent; errors are one line and a non-zero exit (2 for bad input, 1 for a
// failure while running).

func newFrameCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "frame",
		Short: "Craft, send, dump and replay raw Exo frames (hex, raw bytes, pcap/pcapng)",
		Long: `frame works on raw Exo frames (docs/wire.md), one layer below the daemon:
  craft   build frames from flags or JSON: hex, raw bytes or a pcap/pcapng file
  send    send crafted frames (or a pcap's) on an interface, at a rate
  dump    decode frames live on an interface or from a pcap/pcapng file
  replay  send a pcap's Exo frames again, keeping their gaps
Malformed frames are shown with their reason code, never skipped. A Wireshark
dissector for the same frames is tools/wireshark/exo.lua (docs/frames.md).`,
	}
	cmd.AddCommand(newFrameCraftCmd(), newFrameSendCmd(), newFrameDumpCmd(), newFrameReplayCmd())
	return cmd
}

// frameBadInput is an error in the user's input: exit code 2.
func frameBadInput(format string, a ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, a...)}
}

// frameExit gives an error of package frames its exit code: 2 for bad
// input (*frames.InputError), 1 for a failure while running.
func frameExit(err error) error {
	if err == nil {
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	var ie *frames.InputError
	if errors.As(err, &ie) {
		return &exitError{code: 2, err: err}
	}
	return &exitError{code: 1, err: err}
}

// addFrameSourceFlags adds the flags that describe frames (craft and send)
// to cmd, into o.
func addFrameSourceFlags(cmd *cobra.Command, o *frames.Source) {
	f := cmd.Flags()
	f.Uint64Var(&o.Group, "group", 1, "group id (0..65535)")
	f.StringVar(&o.Sender, "sender", "0", "sender: an id 0..254 or a host name (A, B, ..); < --hosts if given")
	f.Uint64Var(&o.Epoch, "epoch", 0, "epoch (0..4294967295)")
	f.StringVar(&o.Seq, "seq", "1", "sequence number N, or an inclusive range A-B (one frame each)")
	f.IntVar(&o.Count, "count", 1, "frames to build: seq, seq+1, ... (with a single --seq)")
	f.StringVar(&o.History, "history", "", "history ids, most recent first: host names (A, B, .., AA) or numbers; X = none (0xFF), e.g. D,C or 3,2 or X,X")
	f.StringVar(&o.Payload, "payload", "", "one record: this text")
	f.StringVar(&o.PayloadHex, "payload-hex", "", "one record: these bytes in hex (after --payload's)")
	f.StringArrayVar(&o.Records, "record", nil, "one more record: this text (repeatable; after --payload-hex's)")
	f.StringArrayVar(&o.RecordsHex, "record-hex", nil, "one more record: these bytes in hex (repeatable; after --record's)")
	f.StringVar(&o.Flags, "flags", "0", "flags: 0, readmit:HOST (a name or id), or a number such as 0x8003 (0x4000: key phase 1, see --key-file)")
	f.StringVar(&o.Tag, "tag", "0", "authentication tag, a 64-bit number (0x... for hex)")
	f.IntVar(&o.Hosts, "hosts", 0, "rack size n: if given, check sender < n, hist_len = floor(n/2), ids < n")
	f.StringVar(&o.JSON, "json", "", "read the frames from this JSON file (- = standard input) instead of the field flags")
	f.StringVar(&o.KeyFile, "key-file", "", "the group key file (key_file): compute each frame's tag (else --tag's: unsigned)")
	o.Given = func(name string) bool { return cmd.Flags().Changed(name) }
}

// frameNoteUnsigned writes, after the frames were written or sent, the
// one-line note that they are unsigned (built without --key-file).
func frameNoteUnsigned(w io.Writer) {
	fmt.Fprintln(w, "exo frame: note: the frames are unsigned (tag from --tag, or 0; not computed): a rack drops them as BAD_TAG; --key-file FILE computes it")
}

// frameCraftOptions are the flags of exo frame craft.
type frameCraftOptions struct {
	frames.CraftOptions
	Out   string // raw bytes
	Pcap  string // pcap, or pcapng if it ends in .pcapng
	Hex   bool
	Print io.Writer
	Note  io.Writer // the note that the frames are unsigned; nil: none
}

func newFrameCraftCmd() *cobra.Command {
	o := &frameCraftOptions{}
	cmd := &cobra.Command{
		Use:   "craft",
		Short: "Build Exo frames from flags or JSON: hex, raw bytes or pcap/pcapng",
		Long: `craft builds Exo frames (docs/wire.md) and writes them as hex (one frame per
line, the bytes after the Ethernet header; the default), as raw bytes (--out),
or as a pcap or pcapng capture with Ethernet headers (--pcap; padded to the
60-byte minimum), which Wireshark (tools/wireshark/exo.lua), exo frame dump,
send and replay read. Every field is checked before anything is written.`,
		Example: `  exo frame craft --sender 4 --epoch 1 --seq 3 --history D,C --payload hello --tag 0x0123456789abcdef
  exo frame craft --hosts 5 --sender E --history D,C --seq 3 --payload hello --key-file /etc/exo/key
  exo frame craft --hosts 5 --sender E --history D,C --seq 1-100 --record a --record b --pcap run.pcap
  exo frame craft --sender 0 --history X,X --flags readmit:C --count 10 --out frames.bin
  exo frame dump --pcap in.pcap --json | exo frame craft --json - --pcap copy.pcap`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return frameBadInput("craft takes no arguments (got %q): the payload is --payload TEXT", args[0])
			}
			o.In, o.Print, o.Note = cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
			return runFrameCraft(o)
		},
	}
	addFrameSourceFlags(cmd, &o.Source)
	f := cmd.Flags()
	f.StringVar(&o.Out, "out", "", "write the frames' raw bytes (after the Ethernet header, unpadded, back to back) to this file (- = standard output)")
	f.StringVar(&o.Pcap, "pcap", "", "write a capture with Ethernet headers to this file: pcap, or pcapng if the name ends in .pcapng")
	f.BoolVar(&o.Hex, "hex", false, "print hex even with --out or --pcap")
	f.StringVar(&o.Src, "src", "", "pcap: source MAC (default: the lab MAC of the sender, 02:e0:00:00:00:<sender+1>)")
	f.StringVar(&o.Dst, "dst", exo.DefaultDstMAC, "pcap: destination MAC")
	f.StringVar(&o.Time, "time", "2025-01-01T00:00:00Z", "pcap: timestamp of the first frame (RFC 3339, or now)")
	f.DurationVar(&o.Gap, "gap", time.Millisecond, "pcap: time between frames (exo frame replay keeps it)")
	return cmd
}

func runFrameCraft(o *frameCraftOptions) error {
	o.Capture = o.Pcap != ""
	o.NG = strings.HasSuffix(strings.ToLower(o.Pcap), ".pcapng")
	c, err := frames.Craft(o.CraftOptions)
	if err != nil {
		return frameExit(err)
	}
	// Everything is checked: write.
	if o.Pcap != "" {
		if err := os.WriteFile(o.Pcap, c.Pcap, 0o644); err != nil {
			return frameExit(err)
		}
	}
	if o.Out != "" {
		var raw []byte
		for _, f := range c.Frames {
			raw = append(raw, f.Bytes...)
		}
		if o.Out == "-" {
			if _, err := o.Print.Write(raw); err != nil {
				return frameExit(err)
			}
		} else if err := os.WriteFile(o.Out, raw, 0o644); err != nil {
			return frameExit(err)
		}
	}
	if (o.Out == "" && o.Pcap == "") || o.Hex {
		w := bufio.NewWriter(o.Print)
		for _, f := range c.Frames {
			fmt.Fprintln(w, hex.EncodeToString(f.Bytes))
		}
		if err := w.Flush(); err != nil {
			return frameExit(err)
		}
	}
	if c.Unsigned && o.Note != nil {
		frameNoteUnsigned(o.Note)
	}
	return nil
}
