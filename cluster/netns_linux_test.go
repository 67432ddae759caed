//go:build linux

package cluster

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/exo-rack/exo/lab"
)

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// sendEthernet sends each whole Ethernet frame (header included, as built
// by the caller) count times from host id's exo0, through an AF_PACKET
// socket that only sends (protocol 0: it receives nothing). It returns the
// frames sent.
func sendEthernet(r *lab.Rack, id int, frames [][]byte, count int) (int, error) {
	sent := 0
	err := lab.InNetns(r.Hosts[id].Netns, func() error {
		ifi, err := net.InterfaceByName(r.Hosts[id].Ifname)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return os.NewSyscallError("socket", err)
		}
		defer unix.Close(fd)
		to := &unix.SockaddrLinklayer{Ifindex: ifi.Index, Halen: 6}
		for k := 0; k < count; k++ {
			for _, f := range frames {
				copy(to.Addr[:6], f[:6])
				to.Protocol = htons(uint16(f[12])<<8 | uint16(f[13]))
				for {
					err := unix.Sendto(fd, f, 0, to)
					if err == unix.ENOBUFS || err == unix.EAGAIN {
						time.Sleep(100 * time.Microsecond)
						continue
					}
					if err != nil {
						return os.NewSyscallError("sendto", err)
					}
					break
				}
				sent++
			}
		}
		return nil
	})
	return sent, err
}

// ethFrame builds an Ethernet frame: broadcast destination, src, the given
// tags (each a full 4-byte 802.1Q tag: TPID and TCI), EtherType, payload.
func ethFrame(src net.HardwareAddr, etherType uint16, payload []byte, tags ...[4]byte) []byte {
	b := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	b = append(b, src...)
	for _, t := range tags {
		b = append(b, t[:]...)
	}
	b = append(b, byte(etherType>>8), byte(etherType))
	return append(b, payload...)
}

// scrapeMetrics fetches http://addr/metrics from inside host id's namespace
// (where the daemon's metrics_addr listens) and returns the unlabelled
// samples by name.
func scrapeMetrics(r *lab.Rack, id int, addr string) (map[string]float64, error) {
	var conn net.Conn
	err := lab.InNetns(r.Hosts[id].Netns, func() error {
		var err error
		conn, err = net.DialTimeout("tcp", addr, 2*time.Second)
		return err
	})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, "GET /metrics HTTP/1.0\r\nHost: "+addr+"\r\n\r\n"); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics of %s: %s", r.Hosts[id].Name, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' || strings.ContainsRune(line, '{') {
			continue
		}
		name, val, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
			out[name] = v
		}
	}
	return out, sc.Err()
}
